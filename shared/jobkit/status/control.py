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

import math
import time
import unicodedata
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.errors import JobKitError, JobWaitTimeout, NotCancellable
from jobkit.records import CANCEL_RECORD_TTL_S, JobStatus
from jobkit.records.cancellations import Cancellation, Watermark
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

        A job ID means one job within its type and domain: a job of that ID
        in another domain is another job, which this leaves alone.

        Returns:
            False when the job's records say it had already ended (ran, was
            skipped, dead-lettered, cancelled): the cancellation is recorded
            anyway, so a copy redriven from the DLQ stays cancelled. True otherwise.

        Raises:
            NotCancellable: the type does not declare ``cancellable``.
        """
        declared = self._cancellable(job_type)
        ref = JobRef(job_type, _domain(domain), _job_id(job_id))
        who = _who(by)
        ended = self._ended(declared, ref)
        now = self._clock.now()
        self._records.cancellations.cancel(ref, now, who, int(now) + CANCEL_RECORD_TTL_S)
        return not ended

    def uncancel(
        self, job_type: str, job_id: str, domain: str | None, *, by: str, pushed_at: float | None = None
    ) -> None:
        """Take back the cancellations recorded until now of one push of a job (the
        one its producer stamped ``pushed_at``: the body's ``enqueuedAt``), its
        own and a ``cancel_all`` that covers it: a copy of it that comes back
        from the DLQ runs. A cancellation recorded later cancels it again;
        another push of the ID stays cancelled."""
        self._cancellable(job_type)
        ref = JobRef(job_type, _domain(domain), _job_id(job_id))
        who, now = _who(by), self._clock.now()
        self._records.cancellations.lift(ref, pushed_at, now, who, int(now) + CANCEL_RECORD_TTL_S)

    def cancel_all(
        self, job_type: str, domain: str | None, *, pushed_before: float | None = None, by: str
    ) -> Watermark:
        """Cancel every job of the type in the domain enqueued at or before
        ``pushed_before`` (epoch seconds, not in the future; default: now)
        that has not started, without listing them. Jobs pushed later run.
        Returns the domain's watermark as it stands (an earlier, later one stays)."""
        self._cancellable(job_type)
        domain, who, now = _domain(domain), _who(by), self._clock.now()
        before = now if pushed_before is None else _epoch(pushed_before, now)
        expires_at = int(max(now, before)) + CANCEL_RECORD_TTL_S
        return self._records.cancellations.cancel_all(job_type, domain, before, now, who, expires_at)

    def status(self, job_type: str, job_id: str, domain: str | None) -> JobStatus | None:
        """The job's status (its latest attempt, of its latest push a runner
        received), with the cancellation that covers that push, if one does;
        ``None`` while no runner has received it.

        Raises:
            JobKitError: the type does not declare ``track_status``.
        """
        declared = self._declaration.job_type(job_type)
        if not declared.track_status:
            raise JobKitError(
                f"{job_type}: jobkit keeps no status of its jobs: declare track_status = true in"
                f" [types.{job_type}] (2 DynamoDB writes per attempt) and deploy"
            )
        ref = JobRef(job_type, _domain(domain), _job_id(job_id))
        found = self._records.status_of(ref)
        if found is None or not declared.cancellable:
            return found
        cover = self._cover(ref, found.enqueued_at)
        if cover is None:
            return found
        return replace(found, cancelled_at=cover.recorded_at, cancelled_by=cover.by)

    def wait(
        self, job_type: str, job_id: str, domain: str | None, timeout_s: float, *, since: float | None = None
    ) -> JobStatus:
        """Poll :meth:`status` (every 0.2 s at first, backing off to 5 s) until the
        job ends, in a status written at or after ``since`` (epoch seconds, the
        runner's clock) if given: after a redrive or a second push of the ID,
        the earlier end is not this one.

        Raises:
            JobWaitTimeout: ``timeout_s`` passed first; its ``last`` holds the last status read.
        """
        deadline = time.monotonic() + (timeout_s if timeout_s > 0 else 0.0)
        pause, last = WAIT_FIRST_S, None
        while True:
            last = self.status(job_type, job_id, domain)
            if last is not None and last.final and (since is None or last.updated_at >= since):
                return last
            left = deadline - time.monotonic()
            if left <= 0:
                state = "not received yet" if last is None else str(last.state)
                raise JobWaitTimeout(f"{job_type} {job_id}: still {state} after {timeout_s:g} s", last)
            self._sleep(min(pause, left))
            pause = min(WAIT_MAX_S, pause * 1.5)

    def _cover(self, ref: JobRef, enqueued_at: float | None) -> Cancellation | Watermark | None:
        """The cancellation that covers the push enqueued at ``enqueued_at``, if one does (and no later lift)."""
        cancellations = self._records.cancellations
        own, watermark = cancellations.of_job(ref), cancellations.watermark(ref.job_type, ref.domain)
        return cancellations.deciding(ref, enqueued_at, own, watermark)

    def _cancellable(self, job_type: str) -> JobType:
        declared = self._declaration.job_type(job_type)
        if not declared.cancellable:
            raise NotCancellable(job_type)
        return declared

    def _ended(self, declared: JobType, ref: JobRef) -> bool:
        if declared.track_status:
            status = self._records.status_of(ref)
            if status is not None and status.final:
                return True
        if declared.deliver_once:
            return self._records.delivery_ended(ref) is not None
        return False


def _domain(domain: str | None) -> str | None:
    from jobkit.core.wire import MAX_DOMAIN_BYTES, valid_domain

    if domain is not None and (not isinstance(domain, str) or not valid_domain(domain)):
        raise JobKitError(
            f"a domain is None (the jobs without one) or a non-empty string of at most {MAX_DOMAIN_BYTES} bytes,"
            f" got {domain!r}"
        )
    return domain


def _epoch(value: object, now: float) -> float:
    """``pushed_before`` as epoch seconds: a finite number, not in the future."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JobKitError(f"pushed_before must be epoch seconds (a number), got {value!r}")
    try:
        before = float(value)
    except OverflowError:
        before = math.inf
    if not math.isfinite(before) or before < 0:
        raise JobKitError(f"pushed_before must be epoch seconds, got {value!r}")
    if before > now:
        hint = " (milliseconds? give seconds)" if before > 1e11 else ""
        raise JobKitError(
            f"pushed_before is {before - now:.0f} s in the future{hint}: a watermark cancels every job pushed"
            " until it, later pushes too, and cannot be moved back"
        )
    return before


def _job_id(job_id: str) -> str:
    from jobkit.core.wire import ID_PATTERN

    if not isinstance(job_id, str) or not ID_PATTERN.fullmatch(job_id):
        raise JobKitError(f"a job ID must match {ID_PATTERN.pattern}, got {job_id!r}")
    return job_id


def _who(by: str) -> str:
    """Who cancels, as log lines, status notes and the web view show it: one
    line of printable text (control and format characters become spaces)."""
    if not isinstance(by, str):
        raise JobKitError(f"say who cancels: by must be a string, got {type(by).__name__}")
    shown = "".join(c if c.isprintable() and unicodedata.category(c) != "Cf" else " " for c in by)
    shown = " ".join(shown.split())[:MAX_BY_CHARS]
    if not shown:
        raise JobKitError("say who cancels: by must be a non-empty string")
    return shown


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

    def wait(self, job_type: str, job_id: str, timeout_s: float = 60.0, *, since: float | None = None) -> JobStatus:
        """Wait for a job of this domain to end (succeeded, dead-lettered,
        skipped, cancelled), polling its status with backoff; with ``since``
        (epoch seconds), an end written before it does not count (a redrive,
        a second push of the ID).

        Raises:
            JobWaitTimeout: it had not ended after ``timeout_s``; ``last`` holds its last status.
        """
        return self._job_control().wait(job_type, job_id, self.domain, timeout_s, since=since)
