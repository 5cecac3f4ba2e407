"""Dead letters: the messages in a DLQ, with why they died.

Where the reason comes from:

- the runner dead-letters with message attributes (see
  :class:`jobkit.sqs.DeadLetterReason`): ``jobkit.reason``,
  ``jobkit.errorClass``, ``jobkit.error``, ``jobkit.attempts``,
  ``jobkit.sourceQueue`` and ``jobkit.deadLetteredAt``;
- a message that SQS's redrive policy moved (the runner crashed or timed out)
  carries none of them: its error is the newest failure record in the jobs
  table, if an attempt got far enough to write one;
- a poison message may not parse at all: then the start of its raw body is
  all there is to show.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from jobkit.errors import SpecError
from jobkit.ops.scan import QueueScan, string_attributes
from jobkit.ops.scope import Scope
from jobkit.records import DedupUnavailable, FailureRecord, RecordsBackend
from jobkit.spec import JobSpecification
from jobkit.sqs import TYPE_ATTRIBUTE, QueueDirectory

log = logging.getLogger(__name__)

BODY_START_CHARS = 120
#: ``reason`` of a message that carries no jobkit.* attributes: SQS moved it.
REDRIVE_POLICY = "redrive_policy"


@dataclass(frozen=True)
class DeadLetter:
    """One message in a DLQ.

    Attributes:
        spec: the job, if the body is a valid spec.
        data: the decoded body, if it is JSON (valid spec or not).
        parse_error: why the body is not a valid spec, if it is not.
        failures: the job's failure records, newest first, when looked up.
    """

    message_id: str
    receipt_handle: str
    body: str
    message_attributes: Mapping[str, Mapping[str, Any]]
    sent_at: float | None
    spec: JobSpecification | None
    data: Any
    parse_error: str | None
    failures: tuple[FailureRecord, ...] = ()

    @property
    def attributes(self) -> dict[str, str]:
        """The message attributes with string values (every jobkit one), by name."""
        return string_attributes(self.message_attributes)

    @property
    def job_id(self) -> str | None:
        if self.spec is not None:
            return self.spec.id
        value = self.data.get("id") if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else None

    @property
    def job_type(self) -> str | None:
        if TYPE_ATTRIBUTE in self.attributes:
            return self.attributes[TYPE_ATTRIBUTE]
        value = self.data.get("type") if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else None

    @property
    def domain(self) -> str | None:
        return self.spec.domain if self.spec is not None else None

    @property
    def reason(self) -> str:
        """``poison``, ``non_retryable``, ``attempts_exhausted``, or ``redrive_policy``."""
        return self.attributes.get("jobkit.reason", REDRIVE_POLICY)

    @property
    def dead_lettered_at(self) -> float | None:
        return _number(self.attributes.get("jobkit.deadLetteredAt"))

    @property
    def attempts(self) -> int | None:
        attempts = _number(self.attributes.get("jobkit.attempts"))
        if attempts is None and self.failures:
            return self.failures[0].attempt
        return None if attempts is None else int(attempts)

    @property
    def error_class(self) -> str | None:
        if "jobkit.errorClass" in self.attributes:
            return self.attributes["jobkit.errorClass"]
        return self.failures[0].error_class if self.failures else None

    @property
    def error(self) -> str | None:
        if "jobkit.error" in self.attributes:
            return self.attributes["jobkit.error"]
        return self.failures[0].message if self.failures else None

    @property
    def last_error(self) -> str | None:
        """``ErrorClass: message``, from the attributes or the newest failure record."""
        if self.error_class is None and self.error is None:
            return None
        return f"{self.error_class or '?'}: {self.error or ''}"

    @property
    def needs_failure_lookup(self) -> bool:
        """Whether only the jobs table can say what the error was."""
        return "jobkit.error" not in self.attributes and self.job_id is not None

    @property
    def body_start(self) -> str:
        return self.body[:BODY_START_CHARS]

    def age_s(self, now: float) -> float | None:
        """Seconds since it was dead-lettered (else since it was sent: SQS keeps
        the original send time when its redrive policy moves a message)."""
        since = self.dead_lettered_at or self.sent_at
        return None if since is None else max(0.0, now - since)

    def matches(self, ids: Iterable[str] = (), error_contains: str | None = None) -> bool:
        """Whether it has one of ``ids`` (job or message IDs) and its last error
        contains ``error_contains`` (case-insensitive). Empty filters match all."""
        wanted = set(ids)
        if wanted and self.job_id not in wanted and self.message_id not in wanted:
            return False
        return error_contains is None or error_contains.casefold() in (self.last_error or "").casefold()

    def to_json(self, now: float, *, full: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message_id": self.message_id,
            "job_id": self.job_id,
            "type": self.job_type,
            "domain": self.domain,
            "age_s": _round(self.age_s(now)),
            "dead_lettered_at": self.dead_lettered_at,
            "enqueued_at": self.spec.enqueued_at if self.spec is not None else None,
            "attempts": self.attempts,
            "reason": self.reason,
            "error_class": self.error_class,
            "error": self.error,
            "source_queue": self.attributes.get("jobkit.sourceQueue"),
        }
        if self.parse_error is not None:
            data["parse_error"] = self.parse_error
            data["body_start"] = self.body_start
        if full:
            data["body"] = self.data if self.data is not None else self.body
            data["attributes"] = dict(self.attributes)
            data["failures"] = [failure_to_json(f) for f in self.failures]
        return data


def failure_to_json(record: FailureRecord) -> dict[str, Any]:
    return {
        "attempt": record.attempt,
        "at": record.at,
        "error_class": record.error_class,
        "message": record.message,
        "traceback": record.traceback,
    }


def dead_letter(message: Mapping[str, Any]) -> DeadLetter:
    """A received DLQ message, parsed as far as it parses."""
    body = message.get("Body", "")
    data: Any = None
    spec: JobSpecification | None = None
    parse_error: str | None = None
    try:
        data = json.loads(body)
    except ValueError as exc:
        parse_error = f"not JSON: {exc}"
    else:
        try:
            spec = JobSpecification.from_dict(data)
        except SpecError as exc:
            parse_error = str(exc)
    sent_ms = _number((message.get("Attributes") or {}).get("SentTimestamp"))
    return DeadLetter(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        body=body,
        message_attributes=message.get("MessageAttributes") or {},
        sent_at=sent_ms / 1000 if sent_ms is not None else None,
        spec=spec,
        data=data,
        parse_error=parse_error,
    )


def with_failures(dead: DeadLetter, records: RecordsBackend | None, *, limit: int = 1) -> DeadLetter:
    """The dead letter with its job's failure records (newest first) attached.

    ``limit=1`` looks only where the attributes do not say what the error was
    (one query per such message); a larger limit always looks, for ``show``.
    """
    spec = dead.spec
    if records is None or spec is None or (limit == 1 and not dead.needs_failure_lookup):
        return dead
    try:
        runs = records.runs(spec.type, spec.id, limit).get(spec.domain)
        failures = list(runs.failures) if runs is not None else []
    except DedupUnavailable as exc:  # the dead letter is still worth showing (no dynamodb:Query, say)
        log.warning("could not read the failure records of %s: %s", dead.job_id, exc)
        return dead
    return replace(dead, failures=tuple(failures))


@dataclass(frozen=True)
class DeadLetterListing:
    """Dead letters of a scope, and how many the DLQ held (SQS's estimate)."""

    scope: Scope
    items: list[DeadLetter]
    approximate_total: int
    limited: bool

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "dlq": self.scope.dlq_name,
            "type_filter": self.scope.type_filter,
            "approximate_total": self.approximate_total,
            "limited": self.limited,
            "messages": [d.to_json(now) for d in self.items],
        }


def list_dead_letters(
    sqs: Any,
    directory: QueueDirectory,
    scope: Scope,
    *,
    records: RecordsBackend | None = None,
    limit: int | None = 100,
    ids: Iterable[str] = (),
    failure_limit: int = 1,
) -> DeadLetterListing:
    """The dead letters of a scope, without consuming them (see :class:`QueueScan`).

    Args:
        records: the jobs table, for errors that only failure records know.
        limit: stop after this many messages of the scope (``None``: all).
        ids: keep only these job or message IDs.
        failure_limit: failure records to attach per message (see :func:`with_failures`).
    """
    _, dlq_url = scope.urls(directory)
    items: list[DeadLetter] = []
    with QueueScan(sqs, dlq_url) as scan:
        total = scan.approximate_count()
        for batch in scan.batches():
            for message in batch:
                dead = dead_letter(message)
                if scope.includes(dead.job_type) and dead.matches(ids):
                    items.append(with_failures(dead, records, limit=failure_limit))
            if limit is not None and len(items) >= limit:
                break
    limited = limit is not None and len(items) >= limit
    return DeadLetterListing(scope, items[:limit], total, limited)


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
