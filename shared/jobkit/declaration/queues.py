"""A declared queue and its runner function, as the job types on it make it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobkit.core.spec import JobSpecification
from jobkit.declaration.lanes import DEFAULT_LANE, Lane, queue_lanes


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A queue and its runner function. Types that share a queue share its function,
    so it takes the largest timeout, memory, concurrency and attempt count of its
    types and the smallest batch size; the runner enforces each type's own
    ``max_attempts`` itself."""

    name: str
    types: tuple[str, ...]
    max_receive_count: int
    timeout_s: int
    memory_mb: int
    batch_size: int
    batch_window_s: int
    max_concurrency: int
    lanes: tuple[Lane, ...] = ()  # the default lane (the queue itself) first, then its priority lanes

    def lane(self, priority: str | None) -> Lane | None:
        """The queue's lane of that priority (None or ``"default"``: its own lane), if it has it."""
        priority = None if priority == DEFAULT_LANE else priority
        return next((lane for lane in self.lanes if lane.priority == priority), None)

    def in_lane(self, lane: str | None, spec: JobSpecification) -> JobSpecification:
        """``spec`` in ``lane`` (its pusher's), unless it names a lane of its
        own or this queue has no lane of that name."""
        if spec.priority is not None or lane is None or self.lane(lane) is None:
            return spec
        return spec.replace(priority=lane)

    @property
    def visibility_timeout_s(self) -> int:
        # AWS: at least six times the function timeout, plus the batching window.
        return 6 * self.timeout_s + self.batch_window_s


def queue_config(name: str, members: Sequence[Any]) -> QueueConfig:
    """The queue that ``members`` (job types) share."""
    return QueueConfig(
        name=name,
        types=tuple(sorted(t.name for t in members)),
        max_receive_count=max(t.max_attempts for t in members),
        timeout_s=max(t.timeout_s for t in members),
        memory_mb=max(t.memory_mb for t in members),
        batch_size=min(t.batch_size for t in members),
        batch_window_s=max(t.batch_window_s for t in members),
        max_concurrency=max(t.max_concurrency for t in members),
        lanes=queue_lanes(name, max(t.max_concurrency for t in members), (t.priorities for t in members)),
    )
