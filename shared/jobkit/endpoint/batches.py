"""Batches over the push endpoint, for producers in any language.

A request's ``"batches"`` entries open batches (or find them opened with the
same callbacks) before its jobs are sent; a job joins one with
``"batch": {"id": "..."}`` in its body (its ``v`` is then 2, filled in if left
out); an entry with ``"seal": true`` seals its batch once the request's jobs
were sent::

    {"batches": [{"id": "import-7", "domain": "enwiki", "description": "upload 7",
                  "onComplete": {"type": "importDone", "params": {"upload": 7}},
                  "seal": true}],
     "jobs": [{"type": "importRow", "domain": "enwiki", "params": {"row": 1}, "batch": {"id": "import-7"}}]}

A batch may take the jobs of several requests: open it in each (the same
callbacks), and seal it in the last. Its callbacks are types the endpoint
takes that declare ``batch_callback``. Each entry is answered under
``"batches"``, in the request's order:

- ``open``: opened (or found open), not sealed; asked to seal, it stays open
  (with an ``error``) if a job of its in the request was not enqueued;
- ``sealed``: sealed, in this request or before;
- ``refused``: not a batch the endpoint takes (malformed, a callback of a type
  it does not take or that does not declare ``batch_callback``, the ID opened
  before with other callbacks); sending it again will not help;
- ``failed``: the jobs table could not record it, or a callback due at the
  seal could not be pushed; sending it again may.

``GET ?batch=ID&domain=D`` answers a batch's status, as ``jobkit batch --json``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.core.errors import BatchError, JobKitError, SpecError
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import ID_PATTERN, check_priority, short
from jobkit.endpoint.control import domain_param, query_params
from jobkit.records import TableUnavailable

if TYPE_CHECKING:
    from jobkit.batches.control import Batch
    from jobkit.declaration.config import Declaration
    from jobkit.push import JobQueueGroup

log = logging.getLogger(__name__)

BATCH_KEYS = ("id", "domain", "description", "onComplete", "onSuccess", "seal")
CALLBACK_KEYS = ("type", "params", "priority")
BATCH_USAGE = "a GET reads one batch's status: ?batch=ID, and &domain=D for a batch of a domain"


@dataclass
class Opened:
    """A request's batch entry, and what became of it."""

    answer: dict[str, Any]
    batch: Batch | None = None
    seal: bool = False
    domain: str | None = None


class EndpointBatches:
    """Opens, seals and reads batches through the endpoint's push group."""

    def __init__(self, declaration: Declaration, group: Callable[[], JobQueueGroup]) -> None:
        self._declaration = declaration
        self._group = group

    def open(self, entries: list[Any]) -> list[Opened]:
        """Open each entry's batch (before the request's jobs are sent)."""
        return [self._open(index, raw) for index, raw in enumerate(entries)]

    def seal(self, opened: list[Opened], unsent: Collection[tuple[Any, Any]] = ()) -> list[dict[str, Any]]:
        """Seal the batches asked to be (after the request's jobs were sent), but
        those of ``unsent`` ((domain, batch ID) of a job not enqueued): the answers, in order."""
        for entry in opened:
            if entry.batch is None or not entry.seal:
                continue
            if (entry.batch.domain, entry.batch.id) in unsent:
                entry.answer["error"] = (
                    "not sealed: some of its jobs in this request were not enqueued; send them again, then seal it"
                )
                continue
            try:
                record = entry.batch.seal()
                entry.answer.update(status="sealed", counts=record.counts.summary())
            except Exception as exc:  # the jobs were sent: answered, never a 500
                _failed(entry.answer, exc, "seal")
        log.info(
            "push endpoint: %d batch(es): %s",
            len(opened),
            ", ".join(f"{e.answer.get('id')} {e.answer['status']}" for e in opened[:10]),
        )
        return [entry.answer for entry in opened]

    def status(self, query: str) -> tuple[int, dict[str, Any]]:
        """The HTTP status and body answering ``GET ?batch=ID&domain=D``."""
        from jobkit.batches.report import batch_report

        try:
            params = query_params(query, ("batch", "domain"), BATCH_USAGE)
            batch_id, domain = _batch_id(params.get("batch")), domain_param(params.get("domain"))
            records = self._group().records
            if records is None:
                raise TableUnavailable("the endpoint has no jobs table")
            return 200, {"batch": batch_report(records, batch_id, domain).to_json()}
        except TableUnavailable as exc:
            return 503, {
                "error": f"the jobs table could not answer; ask again: {exc}",
                "errorClass": "TableUnavailable",
            }
        except SpecError as exc:
            return 400, {"error": str(exc), "errorClass": type(exc).__name__}
        except JobKitError as exc:  # never opened in that domain
            return 404, {"error": str(exc), "errorClass": type(exc).__name__}

    # -- internals -------------------------------------------------------------

    def _open(self, index: int, raw: Any) -> Opened:
        answer: dict[str, Any] = {"index": index}
        entry = Opened(answer)
        try:
            if not isinstance(raw, dict):
                raise SpecError(f"a batch is a JSON object, got {type(raw).__name__}")
            unknown = sorted(set(raw) - set(BATCH_KEYS))
            if unknown:
                raise SpecError(f"unknown field {short(unknown[0])} (a batch has {', '.join(BATCH_KEYS)})")
            batch_id = _batch_id(raw.get("id"))
            answer["id"] = batch_id
            domain = entry.domain = domain_param(raw.get("domain"))
            if not isinstance(raw.get("seal", False), bool):
                raise SpecError(f"seal is true or false, got {short(raw.get('seal'))}")
            description = raw.get("description", "")
            if not isinstance(description, str):
                raise SpecError(f"description is text, got {short(description)}")
            group = self._group().for_domain(domain)
            callbacks = {name: self._callback(name, raw.get(key)) for name, key in _CALLBACKS}
            found = group.batch_status(batch_id)
            entry.seal = bool(raw.get("seal", False))
            if found is not None and found.sealed_at is not None:
                if not entry.seal:
                    raise BatchError(f"batch {batch_id!r} is sealed: it takes no more pushes but its members' own")
                answer.update(status="sealed", counts=found.counts.summary())
                return entry
            entry.batch = group.batch(**callbacks, description=description, id=batch_id)
            answer["status"] = "open"
        except TableUnavailable as exc:  # before JobKitError, which it is: sending it again may help
            _failed(answer, exc, "open")
        except JobKitError as exc:
            answer.update(status="refused", errorClass=type(exc).__name__, error=str(exc))
        return entry

    def _callback(self, name: str, raw: Any) -> JobSpecification | None:
        if raw is None:
            return None
        if not isinstance(raw, dict) or set(raw) - set(CALLBACK_KEYS) or not isinstance(raw.get("type"), str):
            raise SpecError(f'{name} is {{"type": T, "params": {{...}}, "priority": LANE}}, got {short(raw)}')
        check_priority(raw.get("priority"))
        if raw["type"] not in self._declaration.types:
            raise BatchError(f"{name}: the push endpoint does not take {raw['type'][:100]!r}, so it cannot push it")
        params = raw.get("params", {})
        if not isinstance(params, dict):
            raise SpecError(f"{name}: params is an object, got {type(params).__name__}")
        return JobSpecification(raw["type"], params, priority=raw.get("priority"))


_CALLBACKS = (("on_complete", "onComplete"), ("on_success", "onSuccess"))


def _batch_id(value: Any) -> str:
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise SpecError(f"a batch ID must match {ID_PATTERN.pattern}, got {short(value)}")
    return value


def _failed(answer: dict[str, Any], exc: Exception, what: str) -> None:
    log.warning("push endpoint: could not %s batch %s: %s", what, answer.get("id"), exc)
    answer.update(status="failed", errorClass=type(exc).__name__, error=str(exc))
