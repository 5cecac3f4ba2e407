"""Builds the job: the class the declaration names, with the attempt's context
(its attempt number, status tracker, remaining time, and a push SDK bound to its
domain that derives the IDs of the jobs it pushes). A constructor that raises
is a failed attempt."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from jobkit.core.errors import NonRetryableError
from jobkit.core.outcome import RecordResult
from jobkit.jobs.job import JobContext
from jobkit.runner.delivery import Delivery
from jobkit.runner.failures import Failures
from jobkit.runner.stage import JOB_ERRORS, Stage

if TYPE_CHECKING:
    from jobkit.jobs.job import QueueGroup
    from jobkit.runner.stages import Parts, StageKit


class JobInstance(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> JobInstance:
        return cls(parts.failures, kit.group_factory)

    def __init__(self, failures: Failures, group_factory: Callable[[str | None], QueueGroup] | None) -> None:
        self._failures = failures
        self._group_factory = group_factory

    def admit(self, delivery: Delivery) -> RecordResult | None:
        try:
            delivery.job = delivery.job_class(delivery.spec, self._context(delivery))
        except JOB_ERRORS as exc:  # the job's own constructor failed: a failed attempt
            return self._failures.fail(delivery, exc, None, permanent=isinstance(exc, NonRetryableError), fields={})
        return None

    def _context(self, delivery: Delivery) -> JobContext:
        factory, spec = self._group_factory, delivery.spec
        context = JobContext(
            attempt=delivery.attempt, job_type=delivery.job_type, status=delivery.status, chain=spec.chain
        )
        if delivery.cancel_watch is not None:
            context.cancelled = delivery.cancel_watch
        if delivery.context is not None:
            context.remaining_ms = delivery.context.get_remaining_time_in_millis
        if factory is not None:
            # One group per attempt, made when the job first pushes: it derives
            # the IDs of the jobs this attempt pushes.
            made: list[QueueGroup] = []

            def group() -> QueueGroup:
                if not made:
                    made.append(factory(spec.domain).for_job(spec))
                return made[0]

            context._queue_group = group
        return context
