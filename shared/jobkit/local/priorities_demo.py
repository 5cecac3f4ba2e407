"""``jobkit demo --scenario priorities``: urgent jobs of a type are not stuck
behind its backlog.

Its declaration is ``priorities_demo.toml`` beside this module: one type,
``renderPage``, on a queue whose own lane has a concurrency of 4 and whose
``high`` lane has 2 more. A bulk job pushes :data:`BULK` re-renders to the
queue's own lane; the fleet has been at them for :data:`HEAD_START_S` when
a user's edits push :data:`URGENT` re-renders to the high lane. Run twice on
a frozen virtual clock with the parallel fleet (``drain(parallel=True)``), as
the flow-control scenario is:

- with lanes, as declared;
- without: the same type without ``priorities``, and a concurrency of 6 (the
  lanes' together, so that the lanes win by where the jobs wait, not by more
  containers), the urgent jobs pushed with no priority behind the backlog.

It prints the urgent jobs' 95th-percentile pickup delay in each run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.clock import VirtualClock
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, declaration_to_dict, load_declaration, parse_declaration
from jobkit.local.flow_demo import p95
from jobkit.local.stack import LocalStack

#: The scenario's declaration, in the package.
DECLARATION = Path(__file__).with_name("priorities_demo.toml")
TYPE = "renderPage"
LANE = "high"
#: The documented sizes: the backlog, and the urgent jobs pushed behind it.
BULK, URGENT = 10_000, 100
#: How long (virtual seconds) the fleet works at the backlog before the urgent jobs come.
HEAD_START_S = 0.2
START = 1_800_000_000.0


@dataclass(frozen=True)
class PrioritiesDemoReport:
    """What the scenario measured."""

    urgent_p95_ms: float
    urgent_p95_without_lanes_ms: float
    wall_s: float

    @property
    def gain(self) -> float:
        """How many times lower the urgent jobs' p95 pickup is with lanes."""
        return self.urgent_p95_without_lanes_ms / max(self.urgent_p95_ms, 1e-9)

    def lines(self) -> list[str]:
        return [
            f"priorities: high lane p95 pickup {self.urgent_p95_ms:.0f} ms"
            f" (without lanes: {self.urgent_p95_without_lanes_ms:.0f} ms)"
        ]


def run_priorities_demo(
    *, bulk: int = BULK, urgent: int = URGENT, seed: int = 7, on_progress: Callable[[int], None] | None = None
) -> PrioritiesDemoReport:
    """Run the scenario twice, with lanes and without, and measure the urgent jobs' pickups."""
    started = time.perf_counter()
    declaration = load_declaration(DECLARATION)
    with_lanes = urgent_pickups(declaration, LANE, bulk=bulk, urgent=urgent, seed=seed, on_progress=on_progress)
    without = urgent_pickups(
        without_lanes(declaration), None, bulk=bulk, urgent=urgent, seed=seed, on_progress=on_progress
    )
    return PrioritiesDemoReport(p95(with_lanes), p95(without), time.perf_counter() - started)


def urgent_pickups(
    declaration: Declaration,
    priority: str | None,
    *,
    bulk: int,
    urgent: int,
    seed: int = 7,
    on_progress: Callable[[int], None] | None = None,
) -> list[float]:
    """The urgent jobs' pickup delays (ms): pushed with ``priority`` once the
    fleet has worked at the backlog for :data:`HEAD_START_S`."""
    with LocalStack(declaration, clock=VirtualClock(START), seed=seed) as stack:
        group = stack.queue_group("enwiki")
        group.push([JobSpecification(TYPE, {"page": n}) for n in range(bulk)])
        stack.drain(until=stack.clock.now() + HEAD_START_S, parallel=True, on_poll=on_progress)
        edits = [JobSpecification(TYPE, {"page": n, "edit": True}, priority=priority) for n in range(urgent)]
        ids = set(group.push(edits))
        stack.drain(parallel=True, on_poll=on_progress)
        return [
            r.pickup_delay_ms
            for r in stack.results.results
            if r.job_id in ids and r.attempt == 1 and r.pickup_delay_ms is not None
        ]


def without_lanes(declaration: Declaration) -> Declaration:
    """The declaration without priority lanes, its queue's concurrency their sum."""
    raw = declaration_to_dict(declaration)
    for name, keys in raw["types"].items():
        lanes = keys.pop("priorities", None) or {}
        keys["max_concurrency"] = declaration.types[name].max_concurrency + sum(lanes.values())
    return parse_declaration(raw, source=f"{declaration.source} without lanes")
