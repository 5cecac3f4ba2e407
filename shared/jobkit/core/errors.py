"""The jobkit exception tree.

Every error jobkit raises derives from :class:`JobKitError`, so callers can
catch one root. :class:`NonRetryableError` is the one a *job* raises to say
"do not try me again"; it is in the same tree so that a broad
``except JobKitError`` in an app never hides it by accident.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class JobKitError(Exception):
    """Root of every exception jobkit raises."""


class ConfigError(JobKitError):
    """The job declaration (``infra/jobs.toml``) is missing or invalid.

    The message always names the file and the offending key.
    """

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


class NoRegion(JobKitError):
    """No AWS Region was found where jobkit looks for one; the message says
    where it looked, in order, and what it found there."""

    def __init__(self, looked: str) -> None:
        self.looked = looked
        super().__init__(f"no AWS region: {looked}; set AWS_REGION (e.g. export AWS_REGION=us-east-1)")


class SpecError(JobKitError):
    """A job specification is malformed: bad params, bad wire format, too big."""


class UnknownJobType(SpecError):
    """A job names a type that the declaration does not know (or, in a runner,
    a type that the runner's queue does not serve)."""

    def __init__(self, job_type: str, problem: str = "it is not declared in jobs.toml") -> None:
        self.job_type = job_type
        super().__init__(f"unknown job type {job_type!r}: {problem}")


class JobClassError(JobKitError):
    """A declared job class path does not resolve to a :class:`jobkit.Job`."""


@dataclass(frozen=True)
class FailedJob:
    """One job that ``push()`` could not enqueue, and why."""

    job_id: str
    job_type: str
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.job_type} {self.job_id}: {self.code}: {self.message}"


class JobQueueError(JobKitError):
    """Some jobs were not enqueued.

    Attributes:
        failed: exactly the jobs that were not enqueued, with the reason for each.
        enqueued_ids: the IDs of the jobs of the same call that *were* enqueued.
    """

    def __init__(self, failed: Sequence[FailedJob], enqueued_ids: Sequence[str] = ()) -> None:
        self.failed = tuple(failed)
        self.enqueued_ids = tuple(enqueued_ids)
        shown = "; ".join(str(f) for f in self.failed[:5])
        more = f" (and {len(self.failed) - 5} more)" if len(self.failed) > 5 else ""
        super().__init__(f"{len(self.failed)} job(s) not enqueued: {shown}{more}")

    @property
    def failed_ids(self) -> tuple[str, ...]:
        return tuple(f.job_id for f in self.failed)


class NonRetryableError(JobKitError):
    """Raised by a job to fail permanently: the message goes to the DLQ at once."""


class JobFailed(JobKitError):
    """A job's ``run()`` returned False: the attempt failed without an exception."""


class HeldTooLong(JobKitError):
    """Flow control held a job back longer than its type's ``max_held_s``: it is
    dead-lettered without running, to be redriven when the limit allows."""


class NotCancellable(JobKitError):
    """A job of a type that does not declare ``cancellable = true`` cannot be cancelled."""

    def __init__(self, job_type: str) -> None:
        self.job_type = job_type
        super().__init__(
            f"{job_type}: its jobs cannot be cancelled: declare cancellable = true in [types.{job_type}] and deploy"
        )


class BatchError(JobKitError):
    """A batch cannot take this: a member of a type that does not declare
    ``batches``, a callback of one that does not declare ``batch_callback``, a
    push into a sealed batch, a batch ID opened before with other callbacks."""


class JobCancelled(JobKitError):
    """Raised by a job that stops because it was cancelled (``if self.cancelled(): raise JobCancelled()``):
    the job ends ``cancelled``, not failed, and is not retried."""


class JobWaitTimeout(TimeoutError, JobKitError):
    """``group.wait()`` ran out of time before the job ended; ``last`` is the last status it read."""

    def __init__(self, message: str, last: object | None) -> None:
        super().__init__(message)
        self.last = last
