"""Priority lanes: a queue's urgent jobs are not stuck behind its backlog.

SQS has no message priority. A queue that declares lanes
(``priorities = { high = 20, low = 2 }`` on its types) gets a queue of its own
per lane, each with its own DLQ and event source mapping, whose
``MaximumConcurrency`` is the lane's share of the runner: no lane starves
another. The queue's own queue is its default lane, with its
``max_concurrency``. One runner function serves every lane of its queue, so
de-duplication, supersession and limits see one type whatever the lane.

A lane's SQS name is its queue's and ``-{lane}`` (``jobkit-render-high``): its
:attr:`Lane.key` stands where a declared queue's name stands in every name
jobkit gives a queue's SQS resources (:class:`jobkit.core.resources.ResourceNames`).

A job is sent to a lane by its spec's ``priority`` (the wire field of the same
name only routes); a job pushed from a job goes to the pushing job's lane
when its own queue has that lane. Once queued, a job's lane is the queue it
is in: its hops, holds and retries stay there, and its DLQ copy goes to the
lane's DLQ.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from jobkit.core.errors import ConfigError
from jobkit.core.wire import LANE_PATTERN
from jobkit.declaration.options import TypeOption, Where, int_in, table

#: The priority that names a queue's own lane: a job of a lane pushes one there with it
#: (``None`` would take the pushing job's lane).
DEFAULT_LANE = "default"
#: Lane names a queue's names already use: ``-dlq`` (its DLQ's SQS name), ``runner``
#: (``{Queue}RunnerQueue``, its event source mapping's logical ID), ``default`` (its own lane).
RESERVED_LANES = frozenset({"dlq", DEFAULT_LANE, "runner"})


@dataclass(frozen=True, slots=True)
class Lane:
    """One lane of a declared queue: ``priority`` None is the queue's own (default) lane."""

    queue: str
    priority: str | None
    max_concurrency: int

    @property
    def key(self) -> str:
        """What stands for the lane in resource names: its queue's name, and ``-{priority}``."""
        return lane_key(self.queue, self.priority)


def lane_key(queue: str, priority: str | None) -> str:
    """The name that a queue's lane takes in resource names (the queue's own for its own lane)."""
    return queue if priority in (None, DEFAULT_LANE) else f"{queue}-{priority}"


def _priorities(where: Where, raw: Any) -> tuple[tuple[str, int], ...]:
    found = table(where, raw)
    lanes = []
    for name, concurrency in found.items():
        at = where.at(name)
        at.check(
            name,
            lambda v: LANE_PATTERN.fullmatch(v) is not None and v not in RESERVED_LANES,
            f"a lane name must match {LANE_PATTERN.pattern} (it ends its queue's SQS name), and not be"
            f" {' or '.join(sorted(RESERVED_LANES))}",
        )
        at.check(
            concurrency,
            int_in(2, 1000),
            "must be the lane's MaximumConcurrency, an integer from 2 to 1000 (Lambda limit): every lane gets"
            " its own share, so none starves another",
        )
        lanes.append((name, int(concurrency)))
    return tuple(sorted(lanes))


PRIORITY_OPTIONS = (
    TypeOption(
        "priorities",
        (),
        _priorities,
        "= {}",
        "priority lanes of the type's queue, each a queue of its own with its own concurrency, e.g."
        ' { high = 20 }: JobSpecification(..., priority="high") is picked up before the queue\'s backlog.'
        " The queue's own lane keeps max_concurrency; types sharing a queue share its lanes",
        to_toml=lambda lanes: dict(lanes) or None,
    ),
)


def queue_lanes(queue: str, max_concurrency: int, declared: Iterable[tuple[tuple[str, int], ...]]) -> tuple[Lane, ...]:
    """A queue's lanes, its default lane first: the lanes any of its types
    declares, each with the largest concurrency a type gives it (as the
    queue's own concurrency is its types' largest)."""
    merged: dict[str, int] = {}
    for lanes in declared:
        for name, concurrency in lanes:
            merged[name] = max(concurrency, merged.get(name, 0))
    return (Lane(queue, None, max_concurrency), *(Lane(queue, name, merged[name]) for name in sorted(merged)))


class _OnQueue(Protocol):
    @property
    def queue(self) -> str: ...

    @property
    def priorities(self) -> tuple[tuple[str, int], ...]: ...


T = TypeVar("T", bound=_OnQueue)


def share_lanes(types: Mapping[str, T]) -> dict[str, T]:
    """The job types with each one's ``priorities`` made its queue's: every lane
    any type of the queue declares (:func:`queue_lanes` merges them). Any subset
    of the types, such as a runner's or the push endpoint's, then routes to the
    same lanes as the whole declaration."""
    lanes: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for job_type in types.values():
        lanes.setdefault(job_type.queue, []).append(job_type.priorities)
    shared = {
        queue: tuple((lane.priority, lane.max_concurrency) for lane in queue_lanes(queue, 0, declared)[1:])
        for queue, declared in lanes.items()
    }
    return {name: replace(t, priorities=shared[t.queue]) for name, t in types.items()}  # type: ignore[type-var]


def refuse_lane_names(source: str, lanes: Iterable[Lane], queues: Mapping[str, str]) -> None:
    """Refuse a lane whose SQS name is a declared queue's (lane ``high`` of
    queue ``render`` and a queue named ``render-high``). ``queues`` maps each
    queue to a type on it. (No lane's name is too long for SQS: a queue's name
    is at most 40 characters, for its runner's, so a lane's DLQ under the
    longest prefix is at most 78 of SQS's 80.)

    Raises:
        ConfigError: naming the key to change.
    """
    for lane in lanes:
        if lane.priority is not None and lane.key in queues:
            raise ConfigError(
                source,
                f"types.{queues[lane.key]}.queue",
                f"queue {lane.key!r} has the SQS name of lane {lane.priority!r} of queue {lane.queue!r}: rename one",
            )


def blamed(lanes: Iterable[Lane], queues: Mapping[str, str], key: str) -> str:
    """The declaration key that names the lane (or queue) ``key``: a lane's
    ``types.T.priorities.LANE``, a queue's ``types.T.queue`` (``queues`` maps
    each queue to a type on it)."""
    lane = next(lane for lane in lanes if lane.key == key)
    if lane.priority is None:
        return f"types.{queues[lane.queue]}.queue"
    return f"types.{queues[lane.queue]}.priorities.{lane.priority}"
