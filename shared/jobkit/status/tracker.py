"""Job status: what a job of a ``track_status`` type is doing, or did.

The runner records, per attempt, one status record keyed by type, domain and
job ID: ``running`` when the attempt starts, then ``succeeded``, ``failed``
(with the error, and it will be retried), ``dead_lettered`` (failed for
good: its error, and the dead-letter reason in its note), ``skipped`` (a
duplicate, or superseded by a newer root job) or ``cancelled`` (its note
says by whom); ``timed_out`` when the deadline watchdog finds the attempt
still running shortly before the Lambda's deadline. A job may report its progress
(:meth:`jobkit.Job.report_progress`) and a JSON result
(:meth:`jobkit.Job.set_result`); ``jobkit job ID`` shows them.

Cost, per attempt of a tracked type: two writes (start, end), plus one per
progress report that comes at least :data:`PROGRESS_INTERVAL_S` after the
previous write; a result costs nothing extra, it rides on the final write.
Types that do not track status get :class:`StatusTracker`, which writes
nothing.

Status is fail-open like the dedup store: a write that fails is logged and
dropped, and never fails the job.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock
from jobkit.core.errors import JobKitError
from jobkit.records import STATUS_RECORD_TTL_S, JobState, JobStatus

if TYPE_CHECKING:
    from jobkit.core.spec import JobSpecification
    from jobkit.records.store import Records

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 5.0  # the least time between two writes of one attempt's progress
MAX_RESULT_BYTES = 64 * 1024  # well inside DynamoDB's 400 KB item limit
MAX_ERROR_CHARS = 4096

__all__ = ["NO_STATUS", "JobState", "JobStatus", "RecordingStatusTracker", "StatusTracker"]


def check_progress(percent: Any) -> float:
    """A progress report as a float from 0 to 100.

    Raises:
        JobKitError: it is not a number in that range.
    """
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not math.isfinite(percent):
        raise JobKitError(f"progress must be a number from 0 to 100, got {percent!r}")
    if not 0 <= percent <= 100:
        raise JobKitError(f"progress must be from 0 to 100, got {percent!r}")
    return float(percent)


def encode_result(result: Any) -> str:
    """A job's result as compact JSON text.

    Raises:
        JobKitError: it is not JSON-serialisable, or over :data:`MAX_RESULT_BYTES`.
    """
    try:
        text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise JobKitError(f"a job result must be JSON-serialisable: {exc}") from exc
    size = len(text.encode("utf-8"))
    if size > MAX_RESULT_BYTES:
        raise JobKitError(
            f"a job result is {size} bytes, over {MAX_RESULT_BYTES}: store the data elsewhere (S3) and return a key"
        )
    return text


class StatusTracker:
    """Status reporting for one attempt, for types that do not track status:
    it checks what the job reports (so a bug shows before tracking is turned
    on) and writes nothing."""

    def report_progress(self, percent: Any) -> None:
        check_progress(percent)

    def set_result(self, result: Any) -> None:
        encode_result(result)

    def started(self, at: float) -> None:
        """The attempt starts running."""

    def succeeded(self, at: float) -> None:
        """The attempt succeeded."""

    def failed(self, at: float, error: str, *, will_retry: bool) -> None:
        """The attempt failed (or could not start)."""

    def skipped(self, at: float, reason: str) -> None:
        """The job was not run: a duplicate, or superseded."""

    def cancelled(self, at: float, reason: str) -> None:
        """The job was cancelled: not run, or stopped when it saw it."""

    def dead_lettered(self, at: float, error: str, reason: str) -> None:
        """The attempt failed for good: the job is in the DLQ, for ``reason``."""

    def timed_out(self, at: float, error: str) -> None:
        """The attempt is still running shortly before the Lambda deadline (the watchdog)."""


class RecordingStatusTracker(StatusTracker):
    """Records one attempt's status in the jobs table (a status item, see :mod:`jobkit.records.keys`).

    Args:
        backend: where the record lives (the jobs table).
        spec: the job.
        attempt: the attempt number.
        clock: the time source, for progress throttling and expiry.
        correlation_id: the correlation ID the job's message carried.
        enqueued_at: the push's stamp, as its producer wrote it (default: the spec's).
    """

    def __init__(
        self,
        backend: Records,
        spec: JobSpecification,
        attempt: int,
        clock: Clock,
        correlation_id: str | None = None,
        *,
        enqueued_at: float | None = None,
    ) -> None:
        self._backend = backend
        self._clock = clock
        self._status = JobStatus(
            spec.id,
            spec.type,
            spec.domain,
            JobState.RUNNING,
            attempt,
            clock.now(),
            correlation_id=correlation_id,
            enqueued_at=enqueued_at if enqueued_at is not None else spec.enqueued_at,
        )
        self._last_write: float | None = None

    @property
    def status(self) -> JobStatus:
        """What the tracker would write now."""
        return self._status

    def report_progress(self, percent: Any) -> None:
        self._status = replace(self._status, progress=check_progress(percent))
        if self._status.state is not JobState.RUNNING:
            return  # reported outside run(): the final write already happened
        now = self._clock.now()
        if self._last_write is None or now - self._last_write >= PROGRESS_INTERVAL_S:
            self._write(now)

    def set_result(self, result: Any) -> None:
        # Not written now: the final write carries it, at no extra cost.
        self._status = replace(self._status, result=encode_result(result))

    def started(self, at: float) -> None:
        self._status = replace(self._status, state=JobState.RUNNING, started_at=at)
        self._write(at)

    def succeeded(self, at: float) -> None:
        self._status = replace(self._status, state=JobState.SUCCEEDED, finished_at=at, progress=100.0)
        self._write(at)

    def failed(self, at: float, error: str, *, will_retry: bool) -> None:
        self._status = replace(
            self._status, state=JobState.FAILED, finished_at=at, error=error[:MAX_ERROR_CHARS], will_retry=will_retry
        )
        self._write(at)

    def skipped(self, at: float, reason: str) -> None:
        self._status = replace(self._status, state=JobState.SKIPPED, finished_at=at, note=reason)
        self._write(at)

    def cancelled(self, at: float, reason: str) -> None:
        self._status = replace(self._status, state=JobState.CANCELLED, finished_at=at, note=reason)
        self._write(at)

    def dead_lettered(self, at: float, error: str, reason: str) -> None:
        self._status = replace(
            self._status,
            state=JobState.DEAD_LETTERED,
            finished_at=at,
            error=error[:MAX_ERROR_CHARS],
            will_retry=False,
            note=reason,
        )
        self._write(at)

    def timed_out(self, at: float, error: str) -> None:
        self._status = replace(self._status, state=JobState.TIMED_OUT, error=error[:MAX_ERROR_CHARS], will_retry=True)
        self._write(at)

    def _write(self, now: float) -> None:
        self._last_write = now
        self._status = replace(self._status, updated_at=now)
        try:
            self._backend.put_status(self._status, int(now) + STATUS_RECORD_TTL_S)
        except Exception as exc:
            # Fail-open, and broader than the dedup store's: a status record is
            # for people, and no failure to write one may fail the job.
            log.warning(
                "could not record the status of %s %s: %s",
                self._status.job_type,
                self._status.job_id,
                exc,
                extra={"job_id": self._status.job_id, "job_type": self._status.job_type},
            )


#: The tracker of every job that does not track status.
NO_STATUS = StatusTracker()
