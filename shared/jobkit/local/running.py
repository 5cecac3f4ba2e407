"""Running a local stack: rounds of polling, and draining its queues on its clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock, VirtualClock
from jobkit.local.fleet import Fleet
from jobkit.local.moto_patches import has_receivable, next_visible_at

if TYPE_CHECKING:
    from jobkit.declaration.config import Declaration
    from jobkit.local.esm import EventSourceMapping
    from jobkit.local.results import MetricsPublisher
    from jobkit.local.scheduler import LocalScheduler


class Running:
    """The running half of :class:`~jobkit.local.stack.LocalStack`: what it
    needs is set up by the stack's ``start()``."""

    declaration: Declaration
    clock: Clock
    region: str
    account_id: str
    mappings: dict[str, EventSourceMapping]
    scheduler: LocalScheduler | None
    metrics_publisher: MetricsPublisher | None
    _fleet_made: Fleet | None = None  # made by the first parallel drain

    def poll_once(self) -> int:
        """One round of polling; returns the number of records delivered.

        Each queue (each lane of one) gets up to its ``max_concurrency`` batches per round, taken
        in turns, so a queue with more concurrency (enotifNotify's 20 against
        the default 8) gets through its messages faster while a backlog drains
        elsewhere: the nearest a single process comes to Lambda running each
        queue's batches in parallel. Queues with nothing to receive are skipped
        without a request, as Lambda's long polling costs no time either.
        With ``publish_metrics``, a round publishes them when they are due.
        """
        if self.metrics_publisher is not None:
            self.metrics_publisher.tick()
        if self.scheduler is not None:
            self.scheduler.fire_due(self.clock.now())
        delivered = 0
        concurrency = {key: lane.max_concurrency for key, lane in self.declaration.lanes.items()}
        for slot in range(max(concurrency.values(), default=0)):
            for queue, mapping in self.mappings.items():
                if slot < concurrency[queue]:
                    delivered += mapping.poll()  # a queue with nothing to receive costs no request
        return delivered

    def drain(
        self,
        *,
        until: float | None = None,
        max_polls: int = 1_000_000,
        on_poll: Callable[[int], None] | None = None,
        parallel: bool = False,
        timeout_s: float | None = None,
        batch_s: Callable[[str, int], float] | None = None,
    ) -> int:
        """Run jobs until every queue is empty, or until the clock reaches ``until``.

        Idle waits (backoffs, delays) are skipped on a virtual clock and slept
        through on a real one. ``on_poll`` gets the running count of delivered
        records after every round (for progress displays). Returns the number
        of records delivered.

        With ``parallel``, each queue runs up to its ``max_concurrency`` batches
        at once in virtual time, as on Lambda (see :mod:`jobkit.local.fleet`);
        that needs a frozen :class:`VirtualClock`. A batch keeps its container
        busy for as long as it really took, or for ``batch_s(queue, records)``.

        Raises:
            RuntimeError: after ``max_polls`` rounds, or ``timeout_s`` real
                seconds, with jobs still queued.
        """
        if parallel:
            delivered = self._fleet(batch_s).run(until, on_poll)
            if until is not None and isinstance(self.clock, VirtualClock):
                self.clock.advance_to(until)  # as a sequential drain: the clock is at `until` after it
            return delivered
        delivered = 0
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for _ in range(max_polls):
            if deadline is not None and time.monotonic() > deadline:
                raise RuntimeError(f"drain did not finish within {timeout_s} s ({delivered} records delivered)")
            if until is not None and self.clock.now() >= until:
                break
            batch = self.poll_once()
            delivered += batch
            if on_poll is not None:
                on_poll(delivered)
            if batch:
                continue
            wake = self.next_wakeup()
            if until is not None and self.scheduler is not None:  # schedules fire forever: only up to `until`
                due = self.scheduler.next_due()
                wake = due if wake is None or (due is not None and due < wake) else wake
            if wake is None or (until is not None and wake > until):
                break
            self._wait_until(wake)
        else:
            raise RuntimeError(f"drain did not finish within {max_polls} polls")
        if until is not None and isinstance(self.clock, VirtualClock):
            self.clock.advance_to(until)
        return delivered

    def _fleet(self, batch_s: Callable[[str, int], float] | None = None) -> Fleet:
        """The stack's fleet, one for its life: a container still busy with a
        batch when one parallel drain ends is still busy when the next begins."""
        clock = self.clock
        if not isinstance(clock, VirtualClock) or clock.flowing:
            raise ValueError("a parallel drain needs a frozen VirtualClock")
        fleet = self._fleet_made
        if fleet is None:
            fleet = self._fleet_made = self._new_fleet(clock)
        fleet.batch_s = batch_s
        return fleet

    def _new_fleet(self, clock: VirtualClock) -> Fleet:
        return Fleet(
            clock,
            self.mappings,
            {key: lane.max_concurrency for key, lane in self.declaration.lanes.items()},
            lambda key: self._receivable(self.declaration.queue_name(key)),
            self.next_wakeup,
        )

    def _wait_until(self, when: float) -> None:
        # moto compares "now > visible_at" strictly, in milliseconds.
        target = when + 0.002
        if isinstance(self.clock, VirtualClock):
            self.clock.advance_to(target)
        else:
            time.sleep(max(0.0, target - self.clock.now()))

    def next_wakeup(self) -> float | None:
        """When the next hidden or delayed message in a jobkit queue becomes visible."""
        names = [self.declaration.queue_name(key) for key in self.declaration.lanes]
        return next_visible_at(self.account_id, self.region, names, self.clock.now())

    def _receivable(self, name: str) -> bool:
        return has_receivable(self.account_id, self.region, name, self.clock.now())
