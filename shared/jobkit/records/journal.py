"""The runner's journal of a job's attempts in the jobs table: failure
records, final attempts and deferrals.

Writes fail soft: a record that cannot be written is logged and the job goes
on (its attempts then count from SQS's receive count alone). Reads for the
operator (:meth:`AttemptJournal.runs`) raise :class:`~jobkit.records.TableUnavailable`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock, SystemClock
from jobkit.records import (
    DEFERRAL_RECORD_TTL_S,
    FAILURE_RECORD_TTL_S,
    FINAL_RECORD_TTL_S,
    FailureRecord,
    FinalAttempt,
    JobRuns,
    TableUnavailable,
)
from jobkit.records.keys import JobRef

if TYPE_CHECKING:
    from jobkit.records.store import Records

log = logging.getLogger(__name__)


class AttemptJournal:
    """A job's attempts, as the runner records them, over the jobs table."""

    def __init__(self, records: Records, *, clock: Clock | None = None) -> None:
        self._records = records
        self._clock = clock or SystemClock()

    @property
    def records(self) -> Records:
        return self._records

    def record_failure(self, record: FailureRecord) -> bool:
        """Write a failure record (kept 14 days). Returns False if the table was unavailable."""
        try:
            self._records.put_failure(record, self._expiry(FAILURE_RECORD_TTL_S))
        except TableUnavailable as exc:
            log.warning("could not write the failure record of %s: %s", record.job_id, exc)
            return False
        return True

    def record_final(self, record: FinalAttempt) -> bool:
        """Write (or overwrite) a job's final-attempt record. Returns False if the table was unavailable."""
        try:
            self._records.put_final(record, self._expiry(FINAL_RECORD_TTL_S))
        except TableUnavailable as exc:
            log.warning("could not record the final attempt of %s: %s", record.ref.job_id, exc)
            return False
        return True

    def runs(self, ref: JobRef, limit: int = 20) -> JobRuns:
        """A job's failure records (newest first) and final attempt.

        Raises:
            TableUnavailable: the table could not be read.
        """
        return self._records.runs(ref.job_type, ref.job_id, limit, ref.domain).get(ref.domain, JobRuns())

    def failures(self, ref: JobRef, limit: int = 20) -> list[FailureRecord]:
        """A job's failure records, newest first."""
        return list(self.runs(ref, limit).failures)

    def record_deferral(self, job_type: str, message_id: str, attempts_used: int, *, recounted: bool = False) -> bool:
        """Remember, for the re-enqueued message ``message_id``, the attempts its
        job had used (and whether they were recounted). Kept where no sender can
        write it: a message attribute or body field would let anyone forge a
        count, and would survive a redrive."""
        try:
            self._records.put_deferral(
                job_type, message_id, attempts_used, self._expiry(DEFERRAL_RECORD_TTL_S), recounted=recounted
            )
        except TableUnavailable as exc:
            log.warning("could not record the attempts of deferred message %s: %s", message_id, exc)
            return False
        return True

    def attempts_before(self, job_type: str, message_id: str) -> int:
        """The attempts used before the runner re-enqueued this message (0 if it
        did not, or the table cannot say: the job then gets its full attempts)."""
        return self.deferred(job_type, message_id)[0]

    def deferred(self, job_type: str, message_id: str) -> tuple[int, bool]:
        """(attempts used, whether they were recounted) before the runner
        re-enqueued this message: ``(0, False)`` if it did not, or the table
        cannot say (the job then gets its full attempts)."""
        try:
            return self._records.deferred(job_type, message_id) or (0, False)
        except TableUnavailable as exc:
            log.warning("could not read the attempts of deferred message %s: %s", message_id, exc)
            return 0, False

    def _expiry(self, ttl_s: int) -> int:
        return int(self._clock.now()) + ttl_s
