"""What an app (or an operator) may do and know of a job it pushed: cancel it,
cancel every job of a type pushed before a time, and read its status or wait
for its end. :class:`jobkit.push.JobQueueGroup` (whose domain scopes every job
ID), the CLI and the push endpoint all go through :class:`JobControl`.

What is known of a job depends on its type: a ``track_status`` type has a
status record from its first receive on; a type without it leaves no record
of a job that ran well (that is its cost: 0 DynamoDB requests), so its status
cannot be read, and a cancellation of one of its jobs cannot tell whether
the job already ran (it is recorded anyway, and covers the job if it has not).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.errors import JobKitError, JobWaitTimeout, NotCancellable
from jobkit.records import CANCEL_RECORD_TTL_S, JobStatus
from jobkit.records.cancellations import Watermark
from jobkit.records.keys import JobRef

if TYPE_CHECKING:
    from jobkit.declaration.config import Declaration, JobType
    from jobkit.records.store import Records

MAX_BY_CHARS = 200  # who cancelled, as the log lines and status notes show it
WAIT_FIRST_S, WAIT_MAX_S = 0.2, 5.0  # wait()'s first poll, and the longest between two


class JobControl:
    """Cancellations and status over the jobs table, for the types of a declaration.

    Every method raises :class:`~jobkit.core.errors.UnknownJobType` for a type
    the declaration does not hold, and :class:`~jobkit.records.TableUnavailable`
    when the table cannot answer (a cancellation is then not recorded, or only
    its type's mark moved: a runner reads one record too many, no job is cancelled).
    """

    def __init__(
        self, declaration: Declaration, records: Records, clock: Clock, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._declaration = declaration
        self._records = records
        self._clock = clock
        self._sleep = sleep

    def cancel(self, job_type: str, job_id: str, domain: str | None, *, by: str) -> bool:
        """Cancel one job: if it has not started, no runner runs it (it ends ``cancelled``);
        if it runs, its ``self.cancelled()`` says True from its next check.

        Returns:
            False when the job's records say it had already ended (ran, was
            skipped, dead-lettered, cancelled): the cancellation is recorded
            anyway, so a copy redriven from the DLQ stays cancelled. True otherwise.

        A job ID means one job within its type and domain: a job of that ID
        in another domain is another job, which this leaves alone.

        Raises:
            NotCancellable: the type does not declare ``cancellable``.
        """
        declared = self._cancellable(job_type)
        ref = JobRef(job_type, domain, _job_id(job_id))
        ended = self._ended(declared, ref)
        now = self._clock.now()
        self._records.cancellations.cancel(ref, now, _who(by), int(now) + CANCEL_RECORD_TTL_S)
        return not ended

    def uncancel(self, job_type: str, job_id: str, domain: str | None, *, by: str) -> None:
        """Take a job's cancellation back (and a ``cancel_all`` that covers it,
        for this job only): a copy of it that comes back from the DLQ runs."""
        self._cancellable(job_type)
        now = self._clock.now()
        ref = JobRef(job_type, domain, _job_id(job_id))
        self._records.cancellations.cancel(ref, now, _who(by), int(now) + CANCEL_RECORD_TTL_S, lift=True)

    def cancel_all(
        self, job_type: str, domain: str | None, *, pushed_before: float | None = None, by: str
    ) -> Watermark:
        """Cancel every job of the type in the domain enqueued at or before
        ``pushed_before`` (default: now) that has not started, without listing
        them. Jobs pushed later run. Returns the domain's watermark as it stands
        (an earlier, later one stays)."""
        self._cancellable(job_type)
        now = self._clock.now()
        before = now if pushed_before is None else float(pushed_before)
        if before > now + 300:
            raise JobKitError(f"{job_type}: pushed_before is in the future ({before - now:.0f} s ahead)")
        return self._records.cancellations.cancel_all(
            job_type, domain, before, now, _who(by), int(max(now, before)) + CANCEL_RECORD_TTL_S
        )

    def status(self, job_type: str, job_id: str, domain: str | None) -> JobStatus | None:
        """The job's status (its latest attempt), with its cancellation if one
        covers it; ``None`` while no runner has received it.

        Raises:
            JobKitError: the type does not declare ``track_status``.
        """
        declared = self._declaration.job_type(job_type)
        if not declared.track_status:
            raise JobKitError(
                f"{job_type}: jobkit keeps no status of its jobs: declare track_status = true in"
                f" [types.{job_type}] (2 DynamoDB writes per attempt) and deploy"
            )
        ref = JobRef(job_type, domain, _job_id(job_id))
        found = next((s for s in self._records.statuses(job_type, ref.job_id) if s.domain == domain), None)
        if found is None or not declared.cancellable:
            return found
        cancellation = self._records.cancellations.of_job(ref)
        if cancellation is None or cancellation.lifted:
            return found
        return replace(found, cancelled_at=cancellation.at, cancelled_by=cancellation.by)

    def wait(self, job_type: str, job_id: str, domain: str | None, timeout_s: float) -> JobStatus:
        """Poll :meth:`status` (every 0.2 s at first, backing off to 5 s) until the job ends.

        Raises:
            JobWaitTimeout: ``timeout_s`` passed first; its ``last`` holds the last status read.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        pause, last = WAIT_FIRST_S, None
        while True:
            last = self.status(job_type, job_id, domain)
            if last is not None and last.final:
                return last
            left = deadline - time.monotonic()
            if left <= 0:
                state = "not received yet" if last is None else str(last.state)
                raise JobWaitTimeout(f"{job_type} {job_id}: still {state} after {timeout_s:g} s", last)
            self._sleep(min(pause, left))
            pause = min(WAIT_MAX_S, pause * 1.5)

    def _cancellable(self, job_type: str) -> JobType:
        declared = self._declaration.job_type(job_type)
        if not declared.cancellable:
            raise NotCancellable(job_type)
        return declared

    def _ended(self, declared: JobType, ref: JobRef) -> bool:
        if declared.track_status:
            mine = [s for s in self._records.statuses(ref.job_type, ref.job_id) if s.domain == ref.domain]
            if mine and mine[0].final:
                return True
        if declared.deliver_once:
            return self._records.delivery_ended(ref) is not None
        return False


def _job_id(job_id: str) -> str:
    from jobkit.core.wire import ID_PATTERN

    if not isinstance(job_id, str) or not ID_PATTERN.fullmatch(job_id):
        raise JobKitError(f"a job ID must match {ID_PATTERN.pattern}, got {job_id!r}")
    return job_id


def _who(by: str) -> str:
    if not isinstance(by, str) or not by.strip():
        raise JobKitError("say who cancels: by must be a non-empty string")
    return by.strip()[:MAX_BY_CHARS]


class JobControlMethods:
    """``cancel``, ``cancel_all``, ``status`` and ``wait`` for a push group,
    in its domain (:class:`jobkit.push.JobQueueGroup` has them)."""

    domain: str | None

    def _job_control(self) -> JobControl:
        raise NotImplementedError

    def cancel(self, job_type: str, job_id: str, *, by: str = "app") -> bool:
        """Cancel a job of this domain: one not started never runs (it ends ``cancelled``),
        a running one sees it at its next ``self.cancelled()``. False if its
        records say it had ended already (:meth:`JobControl.cancel`).

        Raises:
            NotCancellable: the type does not declare ``cancellable = true``.
            UnknownJobType: the type is not declared.
            TableUnavailable: the jobs table could not record it.
        """
        return self._job_control().cancel(job_type, job_id, self.domain, by=by)

    def cancel_all(self, job_type: str, pushed_before: float | None = None, *, by: str = "app") -> Watermark:
        """Cancel every job of the type in this domain pushed at or before
        ``pushed_before`` (epoch seconds; default now) that has not started:
        a watermark, no listing. Jobs pushed later run."""
        return self._job_control().cancel_all(job_type, self.domain, pushed_before=pushed_before, by=by)

    def status(self, job_type: str, job_id: str) -> JobStatus | None:
        """The status of a job of this domain (a ``track_status`` type): its
        state, attempt, progress, result and error; ``None`` while no runner
        has received it (:meth:`JobControl.status`)."""
        return self._job_control().status(job_type, job_id, self.domain)

    def wait(self, job_type: str, job_id: str, timeout_s: float = 60.0) -> JobStatus:
        """Wait for a job of this domain to end (succeeded, failed for good,
        skipped, cancelled), polling its status with backoff.

        Raises:
            JobWaitTimeout: it had not ended after ``timeout_s``; ``last`` holds its last status.
        """
        return self._job_control().wait(job_type, job_id, self.domain, timeout_s)
