"""Which attempt a delivery is, and what became of a job's last attempt.

The attempt number is the message's receive count plus the attempts its job
used before the runner re-enqueued it (a deferral, which is not an attempt).
That earlier count lives in the jobs table under the new message's ID, where
no sender can write it and a redriven copy (a new message) cannot inherit it.

A receive after a type's last attempt happens when that attempt never
reported back. The final-attempt record, written when the last attempt
started and again when it succeeded, tells what happened, so the runner
never dead-letters a job with a reason that is not true.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from jobkit.core.errors import JobFailed
from jobkit.records import TIMED_OUT, FinalAttempt
from jobkit.records.journal import AttemptJournal
from jobkit.runner.delivery import Delivery
from jobkit.sqs import DEFERRED_ATTRIBUTE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LastAttempt:
    """What the jobs table says of a message's final attempt."""

    attempt: int
    succeeded: bool
    error: JobFailed | None  # why it did not finish, when it did not succeed


class Attempts:
    """Attempt accounting over the attempt journal (none: every count starts at the receive count)."""

    def __init__(self, journal: AttemptJournal | None) -> None:
        self._journal = journal

    def before(self, record: Mapping[str, Any], job_type: str) -> tuple[int, bool]:
        """Attempts used by the messages this one was re-enqueued from, and
        whether the runner recounted them (:mod:`jobkit.runner.stages.recount`)."""
        # Only a message the runner re-enqueued has earlier attempts, and only the
        # jobs table knows how many: the attribute just says where to look, and a
        # record is kept under the message's own ID, which a redrive does not keep.
        if self._journal is None or DEFERRED_ATTRIBUTE not in (record.get("messageAttributes") or {}):
            return 0, False
        return self._journal.deferred(job_type, record["messageId"])

    def started(self, delivery: Delivery, started: float) -> FinalAttempt | None:
        """An attempt starts: if it is the type's last, record that (and on which
        message). Earlier attempts cost no request."""
        if self._journal is None or delivery.attempt < delivery.job_type.max_attempts:
            return None
        final = FinalAttempt(
            delivery.ref, delivery.attempt, delivery.message_id, started, correlation_id=delivery.correlation_id
        )
        self._journal.record_final(final)
        return final

    def succeeded(self, final: FinalAttempt, finished: float) -> None:
        """The last attempt succeeded: a lost delete will not read as a failure."""
        if self._journal is not None:
            self._journal.record_final(replace(final, succeeded_at=finished))

    def last(self, delivery: Delivery) -> LastAttempt | None:
        """What became of this message's final attempt, or None if none is
        recorded (the receives went to batches that died before reaching it, or
        the table cannot say): then this receive is the final attempt."""
        if self._journal is None:
            return None
        try:
            runs = self._journal.runs(delivery.ref)
        except Exception as exc:  # fail-open: one more attempt rather than a guessed reason
            log.warning("could not read the final attempt of %s: %s", delivery.spec.id, exc, extra=delivery.keys)
            return None
        final = runs.final
        if final is None or final.message_id != delivery.message_id:
            return None
        if final.succeeded_at is not None:
            return LastAttempt(final.attempt, True, None)
        failure = next((f for f in runs.failures if f.attempt == final.attempt), None)
        if failure is None:
            why = (
                "the invocation stopped before it reported (out of memory, a crash, or a timeout),"
                " or its failure could not be recorded"
            )
            return LastAttempt(final.attempt, False, JobFailed(f"attempt {final.attempt} did not report back: {why}"))
        if failure.error_class == TIMED_OUT:
            message = f"attempt {final.attempt} did not finish: timed out ({failure.message})"
        else:  # it failed, but could not be dead-lettered then
            message = f"attempt {final.attempt} failed: {failure.error_class}: {failure.message}"
        return LastAttempt(final.attempt, False, JobFailed(message))
