"""Job: the base class of the code that runs a job type.

Subclass it, implement :meth:`Job.run`, and declare the class in
``infra/jobs.toml``. The runner constructs one instance per attempt::

    class RefreshLinksJob(Job):
        def run(self) -> bool:
            page = self.params["title"]
            ...
            return True

A job fails when ``run()`` raises or returns ``False``. It is retried with
backoff up to the type's ``max_attempts``, unless :meth:`allow_retries` is
false or it raises :class:`~jobkit.core.errors.NonRetryableError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from jobkit.core.spec import JobSpecification, new_root_job_params
from jobkit.status.tracker import NO_STATUS, StatusTracker

if TYPE_CHECKING:
    from jobkit.core.chain_link import ChainLink
    from jobkit.declaration.config import Declaration, JobType


class QueueGroup(Protocol):
    """The push SDK as a job sees it: a :class:`jobkit.push.JobQueueGroup`
    bound to the job's domain."""

    def push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[str]: ...

    def lazy_push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> None: ...

    def flush(self) -> list[str]: ...

    def deduplicate_root_job(self, spec: JobSpecification) -> bool: ...

    def for_job(self, parent: JobSpecification) -> QueueGroup: ...

    @property
    def declaration(self) -> Declaration: ...


def _no_queue_group() -> QueueGroup:
    raise RuntimeError("this job was constructed outside a runner: it has no queue group to push to")


def _no_deadline() -> int:
    return 900_000


def _never_cancelled() -> bool:
    return False


@dataclass
class JobContext:
    """What the runner tells a job about the attempt it is making.

    Attributes:
        attempt: 1 for the first attempt, 2 for the first retry, and so on.
        job_type: the declared type, or ``None`` outside a runner.
        remaining_ms: milliseconds left before the Lambda times out.
        status: records the attempt's status, progress and result for types
            that declare ``track_status``; writes nothing for the others.
        cancelled: whether a cancellation covers the job (``cancellable``
            types; always False for the others).
        chain: the chain step the job is of (:meth:`jobkit.JobQueueGroup.chain`), or None.
    """

    attempt: int = 1
    job_type: JobType | None = None
    remaining_ms: Callable[[], int] = _no_deadline
    status: StatusTracker = field(default=NO_STATUS, repr=False)
    cancelled: Callable[[], bool] = field(default=_never_cancelled, repr=False)
    _queue_group: Callable[[], QueueGroup] = field(default=_no_queue_group, repr=False)
    chain: ChainLink | None = None

    @property
    def previous_result(self) -> Any:
        """What the chain's step before this job's left: its one job's result,
        if that job's type declares ``track_status``; otherwise its batch's
        summary (``{"id", "total", "pending", "succeeded", ...}``, counting the
        jobs the step pushed too). None outside a chain, in its first step, or
        after a job that set no result."""
        return self.chain.previous_result if self.chain is not None else None

    @property
    def queue_group(self) -> QueueGroup:
        """A push SDK bound to the job's domain, for jobs that enqueue jobs."""
        return self._queue_group()


class Job:
    """Base class for job types (MediaWiki's Job)."""

    def __init__(self, spec: JobSpecification, context: JobContext | None = None) -> None:
        self.spec = spec
        self.context = context or JobContext()

    # -- what the job is -------------------------------------------------

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def type(self) -> str:
        return self.spec.type

    @property
    def domain(self) -> str | None:
        return self.spec.domain

    @property
    def params(self) -> dict[str, Any]:
        return self.spec.params

    @property
    def priority(self) -> str | None:
        """The priority lane it runs in (None: its queue's default lane); the jobs it pushes go there too."""
        return self.spec.priority

    # -- what subclasses implement ---------------------------------------

    def run(self) -> bool | None:
        """Do the work. Return ``False`` or raise to fail the attempt."""
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    def tear_down(self, succeeded: bool) -> None:
        """Called once after every attempt, whether it succeeded or not."""

    def allow_retries(self) -> bool:
        """Whether a failed attempt may be retried. If not, a failure dead-letters at once."""
        return True

    def error_message(self, error: BaseException) -> str:
        """The text kept of an error this job raised, wherever it is kept: the
        runner's WARNING and ERROR logs, the DLQ copy's ``jobkit.error``
        attribute, failure records and status records (14 days), and the last
        line of the stored traceback.

        The default is ``str(error)``. Override it when errors may quote params
        that must not be stored (an address, a token): return a message without
        them, or ``""`` to keep only the error's class.
        """
        return str(error)

    def ignore_duplicates(self) -> bool:
        """Whether this job may be skipped as a duplicate of an identical later run.

        True when the spec asks for it or the type declares ``remove_duplicates``.
        """
        declared = self.context.job_type.remove_duplicates if self.context.job_type else False
        return self.spec.remove_duplicates or declared

    def deduplication_info(self) -> dict[str, Any]:
        """What makes two jobs duplicates (see :meth:`JobSpecification.deduplication_info`)."""
        return self.spec.deduplication_info(self._declared_ignore_params())

    def dedup_hash(self) -> str:
        return self.spec.dedup_hash(self._declared_ignore_params())

    def _declared_ignore_params(self) -> tuple[str, ...]:
        return self.context.job_type.remove_duplicates_ignore_params if self.context.job_type else ()

    # -- root jobs ---------------------------------------------------------

    @staticmethod
    def new_root_job_params(key: str, now: float | None = None) -> dict[str, Any]:
        """Params that make a job a root job: a SHA-1 signature of ``key``, a
        timestamp and ``rootJobIsSelf``. Leaves pushed later carry the first two
        (see :meth:`root_job_params`); a newer root with the same key supersedes them."""
        import time

        return new_root_job_params(key, time.time() if now is None else now)

    def root_job_params(self) -> dict[str, Any]:
        return self.spec.root_job_params()

    def has_root_job_params(self) -> bool:
        return self.spec.has_root_job_params()

    def is_root_job(self) -> bool:
        return self.spec.is_root_job()

    # -- status ----------------------------------------------------------------

    def report_progress(self, percent: float) -> None:
        """Report how far the job is, from 0 to 100, for ``jobkit job ID``.

        Only types that declare ``track_status`` store it: at most one write per
        5 seconds, the latest value always lands with the final status. Cheap
        elsewhere, and a store that cannot be written never fails the job.

        Raises:
            JobKitError: ``percent`` is not a number from 0 to 100.
        """
        self.context.status.report_progress(percent)

    def cancelled(self) -> bool:
        """Whether the job was cancelled since it started (``jobkit cancel``,
        ``group.cancel``), for a type that declares ``cancellable``: check it
        between steps of a long job, and stop. A job that stops, by returning
        or by raising :class:`jobkit.JobCancelled`, after this said True ends
        ``cancelled`` (not retried); one that never checks runs to its end.
        Cheap: it reads the jobs table at most once every 5 seconds, and
        always answers False for other types."""
        return self.context.cancelled()

    def set_result(self, result: Any) -> None:
        """Set the job's result (JSON-serialisable, at most 64 KiB), shown by
        ``jobkit job ID`` for types that declare ``track_status``. It is stored
        with the attempt's final status, at no extra cost.

        Raises:
            JobKitError: the result is not JSON-serialisable, or too big.
        """
        self.context.status.set_result(result)

    # -- pushing -------------------------------------------------------------

    def push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[str]:
        """Push jobs to the job's domain (a root job fanning out into leaves, say).

        A spec pushed without an explicit ``id`` gets one derived from this job
        (its message) and the child's type, domain and params, so a retried
        attempt that pushes the same children pushes the same IDs again, and
        ``deliver_once`` or ``remove_duplicates`` types catch the repeats.

        Returns:
            The IDs of the pushed jobs, in order.
        """
        return self.context.queue_group.push(jobs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.type} {self.id}>"
