"""Why a message is in the DLQ: established by the tools, never taken from it.

Anyone who may send to a job queue can set ``jobkit.reason``,
``jobkit.error``, ``jobkit.errorClass`` or ``jobkit.attempts`` on a message of
their own; SQS's redrive policy then moves it to the DLQ with them. So a
reason the ops tools show comes from one of two places only:

- **the tool's own check** of the body, as the runner makes it (the parse,
  the time checks, the types this DLQ's queue serves, the type's declared
  params schema): a body that fails it
  is ``poison``, with the tool's own error text;
- **the jobs table**, which only runners write: the job's failure records and
  its final-attempt record, at or after the body's ``enqueuedAt`` (a job ID
  reused later, or in another domain or type, has records of its own).

A message's ``jobkit.*`` attributes are shown too, as :class:`Claimed`:
unverified, never as the reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from jobkit.core.errors import SpecError, UnknownJobType
from jobkit.core.resources import CANARY_TYPE
from jobkit.core.spec import JobSpecification
from jobkit.declaration.params_schema import InvalidParams, ParamsSchema
from jobkit.ops.bodies import safe_text
from jobkit.records import TIMED_OUT, FailureRecord, FinalAttempt, JobRuns


class Reason(StrEnum):
    """What became of a dead job (the ``reason`` field)."""

    POISON = "poison"
    NON_RETRYABLE = "non_retryable"
    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    SUCCEEDED_DELETE_LOST = "succeeded_delete_lost"
    TIMED_OUT = "timed_out"
    NO_ATTEMPT_FINISHED = "no_attempt_finished"
    REDRIVE_POLICY = "redrive_policy"
    HELD_TOO_LONG = "held_too_long"
    UNKNOWN = "unknown"


EXPLANATIONS: dict[str, str] = {
    Reason.POISON: "poison: not a job this queue's runner can take",
    Reason.NON_RETRYABLE: "failed for good: the job said not to retry",
    Reason.ATTEMPTS_EXHAUSTED: "failed on every attempt it had",
    Reason.SUCCEEDED_DELETE_LOST: "succeeded on its last attempt; its delete was lost",
    Reason.TIMED_OUT: "no attempt finished: timed out",
    Reason.NO_ATTEMPT_FINISHED: (
        "no attempt reported back: the invocation was stopped (killed, crashed, timed out)"
        " before it reported, or its report could not be recorded"
    ),
    Reason.REDRIVE_POLICY: "moved by SQS's redrive policy after failed attempts; the runner did not dead-letter it",
    Reason.HELD_TOO_LONG: (
        "held back by its concurrency or rate limit (or a table outage) longer than its max_held_s;"
        " it never ran: redrive it when the limit allows"
    ),
    Reason.UNKNOWN: "unknown: nothing the tools can verify says why",
}


@dataclass(frozen=True)
class Verdict:
    """Why a message is in the DLQ, as far as the tools can tell.

    Attributes:
        reason: a :class:`Reason` value (or another dead-letter reason a newer runner wrote).
        verified: whether the reason comes from the jobs table or the tool's
            own check; ``False`` only for ``unknown``.
        error_class, error: the error that goes with the reason.
        attempts: the attempt it is about.
        dead_lettered_at: when the runner dead-lettered it, from its record.
        note: more about an ``unknown`` (why nothing could be verified).
    """

    reason: str
    verified: bool
    error_class: str | None = None
    error: str | None = None
    attempts: int | None = None
    dead_lettered_at: float | None = None
    note: str | None = None

    @property
    def explanation(self) -> str:
        text = EXPLANATIONS.get(self.reason, self.reason)
        return f"{text} ({self.note})" if self.note else text


def unknown(note: str) -> Verdict:
    return Verdict(Reason.UNKNOWN, False, note=note)


def poison(error: str, error_class: str) -> Verdict:
    """The tool's own finding that a body is not a job this DLQ's runner takes."""
    return Verdict(Reason.POISON, True, error_class, safe_text(error))


def check_times(spec: JobSpecification, now: float) -> Verdict | None:
    """The runner's time checks, made again at ``now``: pass a time no earlier
    than the runner's check (a time too far ahead then is further ahead now).
    ``None``: it passes."""
    try:
        spec.check_times(now)
    except SpecError as exc:
        return poison(str(exc), type(exc).__name__)
    return None


def check_params(spec: JobSpecification, schema: ParamsSchema | None) -> Verdict | None:
    """The runner's params check against the type's declared schema, made again.
    ``None``: it passes, or the type declares no schema."""
    try:
        problem = schema.mismatch(spec.params) if schema is not None else None
    except ValueError:  # the schema itself does not compile: the runner retries such a job, it is not poison
        return None
    if problem is None:
        return None
    error = InvalidParams(spec.type, spec.id, problem)
    return poison(str(error), type(error).__name__)


def check_type(spec: JobSpecification, queue: str, queue_types: tuple[str, ...]) -> Verdict | None:
    """The runner's routing check, made again: the type must be one of this
    DLQ's queue. ``None``: it is."""
    if spec.type not in queue_types and spec.type != CANARY_TYPE:  # every runner serves jobkit verify's canary
        error = UnknownJobType(
            spec.type, f"not a type of queue {queue!r}, whose DLQ this is (it serves {', '.join(queue_types)})"
        )
        return poison(str(error), type(error).__name__)
    return None


def from_runs(runs: JobRuns | None, enqueued_at: float, claimed: Claimed | None = None) -> Verdict:
    """What the jobs table says of a job, from its records since ``enqueued_at``.

    The newest event wins: the final attempt's success (only its delete was
    lost), the final attempt that never reported, the newest failure with the
    dead-letter reason the runner wrote, a timeout the deadline watchdog
    recorded, or else failures SQS's redrive policy ended.

    A message that makes the claims a runner's DLQ copy makes (a reason, its
    source queue, and a dead-letter time no earlier than the job's last record)
    looks like one: if the table has no dead-letter record to confirm it, the
    runner's write may have failed, and the absence of a record proves
    nothing, so it is ``unknown``. Claims that cannot be a runner's copy (the
    sender's own, on the original message SQS moved) leave the records to speak.
    """
    verdict = _from_runs(runs, enqueued_at)
    unconfirmed = verdict.reason in (Reason.NO_ATTEMPT_FINISHED, Reason.REDRIVE_POLICY, Reason.TIMED_OUT)
    if claimed is None or not unconfirmed or not _like_a_runner_copy(claimed, runs):
        return verdict
    return unknown(
        f"the runner's DLQ copy says {claimed.reason!r}, which the jobs table does not confirm:"
        " its record may not have been written"
    )


def _like_a_runner_copy(claimed: Claimed, runs: JobRuns | None) -> bool:
    if claimed.reason is None or claimed.source_queue is None or claimed.dead_lettered_at is None or runs is None:
        return False
    times = [f.at for f in runs.failures]
    if runs.final is not None:
        times += [runs.final.started_at, runs.final.succeeded_at or 0.0]
    # the runner writes the time rounded to the millisecond
    return bool(times) and claimed.dead_lettered_at >= max(times) - 0.001


def _from_runs(runs: JobRuns | None, enqueued_at: float) -> Verdict:
    failures = sorted(
        (f for f in (runs.failures if runs else ()) if f.at >= enqueued_at),
        key=lambda f: (f.at, f.attempt),
        reverse=True,
    )
    final = runs.final if runs is not None and runs.final is not None else None
    final = final if final is not None and final.started_at >= enqueued_at else None
    newest = failures[0] if failures else None
    if final is not None and final.succeeded_at is not None and (newest is None or newest.at <= final.succeeded_at):
        return Verdict(Reason.SUCCEEDED_DELETE_LOST, True, attempts=final.attempt)
    unfinished = _unfinished(final, failures)
    if unfinished is not None and (newest is None or newest.at < unfinished.started_at):
        return Verdict(Reason.NO_ATTEMPT_FINISHED, True, attempts=unfinished.attempt)
    if newest is None:
        return unknown("the jobs table has no record of an attempt since it was enqueued")
    if newest.dead_letter_reason:
        return _from_failure(newest.dead_letter_reason, newest, dead_lettered=True)
    if newest.error_class == TIMED_OUT:
        return _from_failure(Reason.TIMED_OUT, newest)
    return _from_failure(Reason.REDRIVE_POLICY, newest)


def _unfinished(final: FinalAttempt | None, failures: list[FailureRecord]) -> FinalAttempt | None:
    """The final attempt, if it neither succeeded nor left a failure record."""
    if final is None or final.succeeded_at is not None:
        return None
    reported = any(f.attempt == final.attempt and f.at >= final.started_at for f in failures)
    return None if reported else final


def _from_failure(reason: str, failure: FailureRecord, *, dead_lettered: bool = False) -> Verdict:
    return Verdict(
        reason,
        True,
        safe_text(failure.error_class),
        safe_text(failure.message),
        failure.attempt,
        failure.at if dead_lettered else None,
    )


# -- what the message claims ---------------------------------------------------------------------

_SMALL_INT = re.compile(r"^[0-9]{1,9}$")


@dataclass(frozen=True)
class Claimed:
    """The ``jobkit.*`` attributes a message carries: the runner sets them when
    it dead-letters, but any sender may too. Shown as unverified, never as the reason."""

    reason: str | None
    error_class: str | None
    error: str | None
    attempts: int | None
    source_queue: str | None
    dead_lettered_at: float | None

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, str]) -> Claimed | None:
        """The claims among string attributes, or ``None`` if it makes none."""
        if not any(name.startswith("jobkit.") for name in attributes):
            return None

        def text(name: str) -> str | None:
            value = attributes.get(name)
            return None if value is None else safe_text(value)

        attempts = attributes.get("jobkit.attempts", "")
        return cls(
            reason=text("jobkit.reason"),
            error_class=text("jobkit.errorClass"),
            error=text("jobkit.error"),
            attempts=int(attempts) if _SMALL_INT.fullmatch(attempts) else None,
            source_queue=text("jobkit.sourceQueue"),
            dead_lettered_at=_epoch(attributes.get("jobkit.deadLetteredAt")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "error_class": self.error_class,
            "error": self.error,
            "attempts": self.attempts,
            "source_queue": self.source_queue,
            "dead_lettered_at": self.dead_lettered_at,
        }

    @property
    def summary(self) -> str:
        """``reason: ErrorClass: error``, for tables."""
        parts = [p for p in (self.reason, self.error_class, self.error) if p]
        return ": ".join(parts) if parts else "jobkit.* attributes"


def _epoch(value: str | None) -> float | None:
    """An epoch time from text a sender wrote, if it reads as a plausible one."""
    if value is None or len(value) > 32:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and 0 <= number < 1e11 else None
