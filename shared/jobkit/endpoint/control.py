"""Cancellations and job status over the push endpoint, for the types it takes.

A request's ``"cancel"`` entries each name one job or every job of a type
pushed before a time::

    {"type": "refreshLinks", "id": "5b0c...", "domain": "enwiki"}
    {"type": "refreshLinks", "all": true, "pushedBefore": 1795305600, "domain": "enwiki"}

(``domain`` may be left out for null, ``pushedBefore`` for the endpoint's
clock). Each goes through the app's own ``group.cancel`` or
``group.cancel_all`` (:class:`~jobkit.status.control.JobControl`) in its
domain, and is answered on its own, in the request's order:

- ``cancelled``: recorded, and as far as the records tell, the job had not ended;
- ``ended``: recorded, but its records say it had ended already (ran, was
  skipped, dead-lettered or cancelled);
- ``refused``: not a cancellation the endpoint takes (a type it does not take,
  a type that is not ``cancellable``, a malformed ID, missing or unknown
  fields); sending it again will not help;
- ``failed``: the jobs table could not record it; sending it again may.

``GET ?type=T&id=ID&domain=D`` reads one job's status (``group.status`` in the
domain ``D``, or without one when it is left out).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from jobkit.core.errors import JobKitError, SpecError, UnknownJobType
from jobkit.core.wire import ID_PATTERN, MAX_DOMAIN_BYTES, short, valid_domain
from jobkit.records import TableUnavailable
from jobkit.status.control import MAX_BY_CHARS

if TYPE_CHECKING:
    from jobkit.declaration.config import Declaration
    from jobkit.push import JobQueueGroup

log = logging.getLogger(__name__)

#: Who cancels, as the job's status note and the runner's log line name it.
BY = "push endpoint"
CANCEL_KEYS = ("type", "id", "all", "pushedBefore", "domain")
QUERY_KEYS = ("type", "id", "domain")
STATES = ("cancelled", "ended", "refused", "failed")
GET_USAGE = "a GET reads one job's status: ?type=T&id=ID, and &domain=D for a job of a domain"


@dataclass(frozen=True, slots=True)
class CancelEntry:
    """One cancellation of a request: a job (``job_id``), or every job of the type pushed before a time."""

    job_type: str
    domain: str | None
    job_id: str | None = None
    pushed_before: float | None = None


def cancelled_by(principal: str | None) -> str:
    """``by`` of the endpoint's cancellations: the endpoint, and the caller's IAM principal when known."""
    shown = "".join(c for c in principal or "" if c.isprintable()).strip()
    return (f"{BY} ({shown})" if shown else BY)[:MAX_BY_CHARS]


def job_keys(raw: Any) -> dict[str, Any]:
    """What a refused entry's answer can name of it: its id and type, if they are strings."""
    if not isinstance(raw, dict):
        return {}
    return {k: raw[k] for k in ("id", "type") if isinstance(raw.get(k), str) and len(raw[k]) <= 200}


class EndpointControl:
    """Cancels and reads the status of jobs of the endpoint's types, through its push group."""

    def __init__(self, declaration: Declaration, group: Callable[[], JobQueueGroup]) -> None:
        self._declaration = declaration
        self._group = group

    def cancel(self, entries: list[Any], by: str) -> list[dict[str, Any]]:
        """Record each cancellation; an answer per entry, in order."""
        answers = [{"index": index, **self._cancel(raw, by)} for index, raw in enumerate(entries)]
        log.info(
            "push endpoint: %d of %d cancellations recorded",
            sum(1 for a in answers if a["status"] in ("cancelled", "ended")),
            len(answers),
        )
        return answers

    def status(self, query: str) -> tuple[int, dict[str, Any]]:
        """The HTTP status and body answering ``GET ?{query}``."""
        try:
            job_type, job_id, domain = self._job_of(query)
        except SpecError as exc:
            return 400, {"error": str(exc), "errorClass": type(exc).__name__}
        try:
            found = self._group().for_domain(domain).status(job_type, job_id)
        except TableUnavailable as exc:
            log.warning("push endpoint: could not read the status of %s %s: %s", job_type, job_id, exc)
            return 503, {
                "error": f"the jobs table could not answer; ask again: {exc}",
                "errorClass": "TableUnavailable",
            }
        except JobKitError as exc:  # the type keeps no status
            return 400, {"error": str(exc), "errorClass": type(exc).__name__}
        if found is None:
            where = "" if domain is None else f" in domain {domain!r}"
            return 404, {
                "error": f"nothing is known of {job_type} {job_id}{where} yet: no runner has received it"
                " (or it was pushed in another domain, or its status has expired)"
            }
        return 200, {"status": found.to_json()}

    # -- internals -------------------------------------------------------------

    def _cancel(self, raw: Any, by: str) -> dict[str, Any]:
        answer = job_keys(raw)
        try:
            entry = self._entry(raw)
            group = self._group().for_domain(entry.domain)
            if entry.job_id is not None:
                answer["status"] = "cancelled" if group.cancel(entry.job_type, entry.job_id, by=by) else "ended"
            else:
                mark = group.cancel_all(entry.job_type, entry.pushed_before, by=by)
                answer.update(status="cancelled", pushedBefore=mark.before)
        except TableUnavailable as exc:  # before JobKitError, which it is: sending it again may help
            log.warning("push endpoint: could not record a cancellation of %s: %s", answer.get("type"), exc)
            answer.update(status="failed", errorClass=type(exc).__name__, error=str(exc))
        except JobKitError as exc:
            answer.update(status="refused", errorClass=type(exc).__name__, error=str(exc))
        except Exception as exc:  # a bug here must not fail the request: its jobs were sent already
            log.exception("push endpoint: a cancellation of %s failed", answer.get("type"))
            answer.update(status="failed", errorClass=type(exc).__name__, error=f"the endpoint failed: {exc}")
        return answer

    def _entry(self, raw: Any) -> CancelEntry:
        """The entry, if it is a cancellation of a type the endpoint takes (that type's
        ``cancellable`` is checked by the group, which raises NotCancellable)."""
        if not isinstance(raw, dict):
            raise SpecError(f"a cancellation is a JSON object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(CANCEL_KEYS))
        if unknown:
            raise SpecError(f"unknown field {unknown[0]!r} (a cancellation has {', '.join(CANCEL_KEYS)})")
        job_type = self._taken(raw.get("type"))
        domain = domain_param(raw.get("domain"))
        every, job_id = raw.get("all"), raw.get("id")
        if "all" in raw and every is not True:
            raise SpecError(f"all is true or left out, got {every!r}")
        if (job_id is None) == (every is None):
            raise SpecError('give the job\'s "id", or "all": true (not both)')
        if every is None:
            if "pushedBefore" in raw:
                raise SpecError('pushedBefore goes with "all": true')
            return CancelEntry(job_type, domain, job_id=_job_id(job_id))
        before = raw.get("pushedBefore")
        if before is not None and not _epoch_seconds(before):
            raise SpecError(f"pushedBefore is epoch seconds (a number), got {short(before)}")
        return CancelEntry(job_type, domain, pushed_before=None if before is None else float(before))

    def _job_of(self, query: str) -> tuple[str, str, str | None]:
        params = query_params(query, QUERY_KEYS, GET_USAGE)
        if "type" not in params or "id" not in params:
            raise SpecError(GET_USAGE)
        return self._taken(params["type"]), _job_id(params["id"]), domain_param(params.get("domain"))

    def _taken(self, job_type: Any) -> str:
        if not isinstance(job_type, str) or not job_type:
            raise SpecError(f"type is a job type's name, got {job_type!r}")
        if job_type not in self._declaration.types:
            taken = ", ".join(sorted(self._declaration.types))
            raise UnknownJobType(job_type[:200], f"the push endpoint does not take it (it takes {taken})")
        return job_type


def _job_id(job_id: Any) -> str:
    if not isinstance(job_id, str) or not ID_PATTERN.fullmatch(job_id):
        raise SpecError(f"id must match {ID_PATTERN.pattern}, got {job_id!r:.100}")
    return job_id


def query_params(query: str, keys: tuple[str, ...], usage: str) -> dict[str, str]:
    """A GET's parameters, each of ``keys`` at most once (``usage`` says what a GET takes).

    Raises:
        SpecError: the query string cannot be read, or has another or a repeated parameter.
    """
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True, errors="strict")
    except ValueError as exc:
        raise SpecError(f"the query string cannot be read ({exc}): {usage}") from None
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in keys:
            raise SpecError(f"unknown parameter {name[:40]!r}: {usage}")
        if name in params:
            raise SpecError(f"{name} is given twice: {usage}")
        params[name] = value
    return params


def domain_param(domain: Any) -> str | None:
    if domain is None or (isinstance(domain, str) and valid_domain(domain)):
        return domain
    raise SpecError(f"domain is null or a non-empty string of at most {MAX_DOMAIN_BYTES} bytes in UTF-8")


def _epoch_seconds(value: Any) -> bool:
    """A finite, non-negative number (an integer of 400 digits is not: it overflows a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:
        return False
