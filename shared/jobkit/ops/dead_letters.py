"""Dead letters: the messages in a DLQ, and why they died.

- **Any body** is read safely (:mod:`jobkit.ops.bodies`): a message that is
  not a job is listed as unreadable, by its message ID, so it can still be
  shown, redriven or deleted.
- **Why it died** is what the tools establish (:mod:`jobkit.ops.verdict`):
  their own check of the body, or the runner's records in the jobs table.
  The ``jobkit.*`` attributes a message carries are shown as ``claimed``:
  any sender may set them.
- **Which type it belongs to** is its body's, never the ``JobType`` attribute
  a sender chose (shown as ``claimed_type`` when it differs). A message whose
  body names no type of this DLQ's queue belongs to no type: it is in the
  queue's whole-DLQ scope, and its message ID selects it in any scope.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from jobkit.core.correlation import correlation_of
from jobkit.core.resources import CANARY_TYPE
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import is_reference
from jobkit.ops.bodies import body_start, read_body, safe_text
from jobkit.ops.records_json import failure_to_json, final_to_json
from jobkit.ops.scan import QueueScan, string_attributes
from jobkit.ops.scope import Scope
from jobkit.ops.verdict import (
    Claimed,
    Reason,
    Verdict,
    check_params,
    check_times,
    check_type,
    from_runs,
    poison,
    unknown,
)
from jobkit.records import FailureRecord, FinalAttempt, TableUnavailable
from jobkit.sqs import CORRELATION_ATTRIBUTE, ORIGINAL_MESSAGE_ATTRIBUTE, TYPE_ATTRIBUTE, QueueDirectory

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from jobkit.payloads.reference import ParamsRef
    from jobkit.records.store import Records

log = logging.getLogger(__name__)

#: ``reason`` of a job whose failures SQS's redrive policy ended (see :class:`Reason`).
REDRIVE_POLICY = Reason.REDRIVE_POLICY
#: Records read per message for a listing: enough for the newest failures and the final attempt.
LIST_RECORD_LIMIT = 20
#: ... and for ``show``, which lists every failure.
SHOW_RECORD_LIMIT = 100


@dataclass(frozen=True)
class DeadLetter:
    """One message in a DLQ.

    Attributes:
        spec: the job, if the body parses as one.
        data: the decoded body, if it can be shown as JSON (else show ``body``).
        parse_error: why the body is not a job, if it is not.
        verdict: why it died, once established (:func:`judged`); the tool's own
            finding for a body that is not a job.
        failures: the job's failure records since it was enqueued, newest first.
        final: its final-attempt record, if that attempt started since it was enqueued.
        source_queue: the queue whose DLQ this is.
    """

    message_id: str
    receipt_handle: str
    body: str
    message_attributes: Mapping[str, Mapping[str, Any]]
    sent_at: float | None
    spec: JobSpecification | None
    data: Any
    parse_error: str | None
    verdict: Verdict | None = None
    failures: tuple[FailureRecord, ...] = ()
    final: FinalAttempt | None = None
    source_queue: str | None = None
    params_ref: ParamsRef | None = None  # its params are in the payload bucket (see jobkit.ops.dead_params)

    @property
    def attributes(self) -> dict[str, str]:
        """The message attributes with string values, by name, made printable."""
        return {safe_text(k): safe_text(v) for k, v in string_attributes(self.message_attributes).items()}

    @property
    def readable(self) -> bool:
        """Whether the body is a job (else it is listed by its message ID only)."""
        return self.spec is not None

    @property
    def job_id(self) -> str | None:
        return self.spec.id if self.spec is not None else None

    @property
    def job_type(self) -> str | None:
        """The body's type: the one the runner routed it by."""
        return self.spec.type if self.spec is not None else None

    @property
    def original_message_id(self) -> str | None:
        """The message ID of the unreadable message a runner copied here (the
        ID its logs and ``jobkit local up`` print). Only for a body that is not
        a job and says it is a runner's poison copy: a readable job is found by
        its job ID, and a message SQS's redrive policy moved keeps its sender's
        attributes, so a job could claim another message's ID."""
        if self.readable or self.attributes.get("jobkit.reason") != "poison":
            return None
        original = self.attributes.get(ORIGINAL_MESSAGE_ATTRIBUTE)
        return original if original and original != self.message_id else None

    @property
    def claimed_type(self) -> str | None:
        """The ``JobType`` attribute, when it says something other than the body."""
        claimed = self.attributes.get(TYPE_ATTRIBUTE)
        return claimed if claimed != self.job_type else None

    @property
    def domain(self) -> str | None:
        return self.spec.domain if self.spec is not None else None

    @property
    def correlation_id(self) -> str | None:
        """The correlation ID its producer sent (the request or job that pushed it), if a valid one,
        else the job's own ID, as the runner logged it (:func:`jobkit.core.correlation.correlation_of`).
        A sender's claim, like the type attribute: it leads to the request's logs."""
        return correlation_of(self.attributes.get(CORRELATION_ATTRIBUTE), self.job_id)

    @property
    def claimed(self) -> Claimed | None:
        return Claimed.from_attributes(self.attributes)

    @property
    def reason(self) -> str:
        return self.verdict.reason if self.verdict is not None else Reason.UNKNOWN

    @property
    def verified(self) -> bool:
        return self.verdict is not None and self.verdict.verified

    @property
    def explanation(self) -> str:
        return self.verdict.explanation if self.verdict is not None else unknown("not looked up").explanation

    @property
    def attempts(self) -> int | None:
        return self.verdict.attempts if self.verdict is not None else None

    @property
    def error_class(self) -> str | None:
        return self.verdict.error_class if self.verdict is not None else None

    @property
    def error(self) -> str | None:
        return self.verdict.error if self.verdict is not None else None

    @property
    def dead_lettered_at(self) -> float | None:
        return self.verdict.dead_lettered_at if self.verdict is not None else None

    @property
    def last_error(self) -> str | None:
        """``ErrorClass: message``, as far as it is verified."""
        if self.error_class is None and self.error is None:
            return None
        return f"{self.error_class or '?'}: {self.error or ''}"

    @property
    def body_start(self) -> str:
        return body_start(self.body)

    def age_s(self, now: float) -> float | None:
        """Seconds since the runner dead-lettered it (by its record), else since
        SQS says it was sent: a runner's DLQ copy is sent when it dead-letters,
        and SQS keeps the original send time when its redrive policy moves one."""
        since = self.dead_lettered_at or self.sent_at
        return None if since is None else max(0.0, now - since)

    def owner(self, scope: Scope) -> str | None:
        """The type of this DLQ's queue it belongs to, if its body names one."""
        if self.job_type in scope.queue_types or self.job_type == CANARY_TYPE:  # every runner serves the canary
            return self.job_type
        return None

    def selected(self, scope: Scope, ids: Iterable[str] = (), *, message_ids_only: bool = False) -> bool:
        """Whether it is in ``scope`` and has one of ``ids`` (job or message IDs;
        none: all). A message that belongs to no type is in a queue's whole
        scope only, unless its message ID (or, for a runner's copy, the ID of
        the message it copies) is asked for. With ``message_ids_only``,
        ``ids`` are message IDs alone: a job ID is its sender's choice, and a
        sender could give a job the message ID of a dead letter an operator
        picked, to have it taken along."""
        wanted = set(ids)
        owner = self.owner(scope)
        # the original's message ID, from the runner's logs, finds its copy (a
        # sender's own attribute could claim one, so not where IDs are message IDs alone)
        by_id = self.message_id in wanted or (not message_ids_only and self.original_message_id in wanted)
        if owner is None and by_id:
            return True
        if not scope.includes(owner):
            return False
        by_job = self.job_id in wanted and not message_ids_only
        return not wanted or by_job or by_id

    def error_matches(self, error_contains: str | None) -> bool:
        """Whether its verified last error contains the text (any case); ``None`` matches all."""
        return error_contains is None or error_contains.casefold() in (self.last_error or "").casefold()

    def to_json(self, now: float, *, full: bool = False) -> dict[str, Any]:
        claimed = self.claimed
        data: dict[str, Any] = {
            "message_id": self.message_id,
            "original_message_id": self.original_message_id,
            "job_id": self.job_id,
            "type": self.job_type,
            "claimed_type": self.claimed_type,
            "domain": self.domain,
            "readable": self.readable,
            "age_s": _round(self.age_s(now)),
            "dead_lettered_at": self.dead_lettered_at,
            "enqueued_at": self.spec.enqueued_at if self.spec is not None else None,
            "attempts": self.attempts,
            "reason": self.reason,
            "verified": self.verified,
            "explanation": self.explanation,
            "error_class": self.error_class,
            "error": self.error,
            "source_queue": self.source_queue,
            "correlation_id": self.correlation_id,
            "claimed": claimed.to_json() if claimed is not None else None,
        }
        if self.parse_error is not None:
            data["parse_error"] = self.parse_error
            data["body_start"] = self.body_start
        if full:
            data["body"] = self.data if self.data is not None else safe_text(self.body)
            data["attributes"] = self.attributes
            data["failures"] = [failure_to_json(f) for f in self.failures]
            data["final_attempt"] = final_to_json(self.final)
        return data


def dead_letter(message: Mapping[str, Any]) -> DeadLetter:
    """A received DLQ message, read as far as it reads. Never raises on a body."""
    body = message.get("Body", "")
    body = body if isinstance(body, str) else ""
    attributes = message.get("MessageAttributes") or {}
    read = read_body(body, attributes)
    sent_ms = _number((message.get("Attributes") or {}).get("SentTimestamp"))
    return DeadLetter(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        body=body,
        message_attributes=attributes,
        sent_at=sent_ms / 1000 if sent_ms is not None else None,
        spec=read.spec,
        data=read.data,
        parse_error=read.problem if read.spec is None else None,
        verdict=poison(read.problem, read.problem_class or "SpecError") if read.problem is not None else None,
        params_ref=read.params_ref,
    )


def judged(
    dead: DeadLetter, scope: Scope, records: Records | None, *, now: float, limit: int = LIST_RECORD_LIMIT
) -> DeadLetter:
    """The dead letter with why it died: the tool's own check of the type, then
    one query of the job's records in the jobs table, then the tool's own check
    of the times and of the params against the declared schema (records first:
    the operator's clock is not the runner's, nor its declaration)."""
    dead = replace(dead, source_queue=scope.sqs_name)
    spec = dead.spec
    if dead.verdict is not None or spec is None:
        return dead
    routed = check_type(spec, scope.queue, scope.queue_types)
    if routed is not None:
        return replace(dead, verdict=routed)
    # Records older than the message belong to an earlier life of the job (before
    # a redrive, say) when SQS moved the message itself; a runner's own DLQ copy
    # (it claims a reason) is sent after the records it explains.
    since = spec.enqueued_at or 0.0
    if dead.claimed is None or dead.claimed.reason is None:
        since = max(since, dead.sent_at or 0.0)
    verdict, failures, final = _from_records(dead, records, spec, since, limit)
    if verdict.reason == Reason.UNKNOWN:
        timed = check_times(spec, max(now, dead.sent_at or 0.0))
        # (a job whose params are in the payload bucket has none here to check)
        unread = is_reference(dead.data)
        verdict = timed or (None if unread else check_params(spec, scope.param_schemas.get(spec.type))) or verdict
    return replace(dead, verdict=verdict, failures=failures, final=final)


def _from_records(
    dead: DeadLetter, records: Records | None, spec: JobSpecification, since: float, limit: int
) -> tuple[Verdict, tuple[FailureRecord, ...], FinalAttempt | None]:
    if records is None:
        return unknown("the jobs table was not read"), (), None
    try:
        runs = records.runs(spec.type, spec.id, limit, spec.domain).get(spec.domain)
    except TableUnavailable as exc:  # the dead letter is still worth showing (no dynamodb:Query, say)
        log.warning("could not read the records of %s: %s", spec.id, exc)
        return unknown(f"could not read the jobs table: {exc}"), (), None
    failures = tuple(f for f in runs.failures if f.at >= since) if runs is not None else ()
    final = runs.final if runs is not None else None
    final = final if final is not None and final.started_at >= since else None
    return from_runs(runs, since, dead.claimed), failures, final


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
    sqs: SQSClient,
    directory: QueueDirectory,
    scope: Scope,
    *,
    records: Records | None = None,
    now: float | None = None,
    limit: int | None = 100,
    ids: Iterable[str] = (),
    record_limit: int = LIST_RECORD_LIMIT,
    message_ids_only: bool = False,
) -> DeadLetterListing:
    """The dead letters of a scope, without consuming them (see :class:`QueueScan`),
    each with why it died (:func:`judged`: one jobs-table query per job).

    Args:
        records: the jobs table; without it, a job's reason is ``unknown``.
        now: the time for the tool's own time checks (default: the system clock).
        limit: stop after this many messages of the scope (``None``: all).
        ids: keep only these job or message IDs.
        record_limit: records to read per job (``show`` reads them all).
        message_ids_only: ``ids`` are message IDs alone (see :meth:`DeadLetter.selected`).
    """
    now = time.time() if now is None else now
    wanted = list(ids)
    _, dlq_url = scope.urls(directory)
    items: list[DeadLetter] = []
    with QueueScan(sqs, dlq_url) as scan:
        total = scan.approximate_count()
        for batch in scan.batches():
            for message in batch:
                dead = dead_letter(message)
                if dead.selected(scope, wanted, message_ids_only=message_ids_only):
                    items.append(judged(dead, scope, records, now=now, limit=record_limit))
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


def find_dead_letters(
    sqs: SQSClient, directory: QueueDirectory, scope: Scope, id_: str, *, records: Records | None, now: float
) -> DeadLetterListing:
    """Every dead letter of a scope with a job or message ID, with all its records (for ``show``)."""
    return list_dead_letters(
        sqs, directory, scope, records=records, now=now, limit=None, ids=[id_], record_limit=SHOW_RECORD_LIMIT
    )
