"""Lambda's parallelism on one core: a discrete-event simulation on a virtual clock.

On AWS each queue's event source mapping runs up to ``max_concurrency`` batches
at once, and queues do not wait for one another. One process cannot run them
in parallel, so the fleet runs each batch at once with the clock stopped at
the batch's start, measures how long it really took (or takes a model's
figure for it: the same on every machine), and keeps that container busy for
that long in virtual time. Then the clock moves to the next event: a
container coming free, or a hidden or delayed message becoming visible.

Pickup delays measured this way are what a fleet of such containers would
see: an email queue with its own concurrency is picked up at once while a
purge backlog drains on another queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from jobkit.core.clock import VirtualClock
from jobkit.local.esm import EventSourceMapping


class Fleet:
    """Containers per queue, each busy until some virtual time."""

    def __init__(
        self,
        clock: VirtualClock,
        mappings: Mapping[str, EventSourceMapping],
        concurrency: Mapping[str, int],
        receivable: Callable[[str], bool],
        next_visible: Callable[[], float | None],
        batch_s: Callable[[str, int], float] | None = None,
    ) -> None:
        self._clock = clock
        self.batch_s = batch_s  # a model of a batch's time (queue, records -> seconds); None: its real time
        self._mappings = mappings
        self._busy_until = {queue: [0.0] * concurrency[queue] for queue in mappings}
        self._receivable = receivable
        self._next_visible = next_visible

    def run(self, until: float | None, on_poll: Callable[[int], None] | None) -> int:
        delivered = 0
        while until is None or self._clock.now() < until:
            started = self._start_free_containers()
            delivered += started
            if started:
                if on_poll is not None:
                    on_poll(delivered)
                continue
            wake = self._next_event()
            if wake is None or (until is not None and wake > until):
                break
            self._clock.advance_to(wake)
        return delivered

    def _start_free_containers(self) -> int:
        """Start a batch in every free container that has messages. Returns records started."""
        now = self._clock.now()
        delivered = 0
        for queue, mapping in self._mappings.items():
            containers = self._busy_until[queue]
            for slot, busy_until in enumerate(containers):
                if busy_until > now or not self._receivable(queue):
                    continue
                began = time.perf_counter()
                count = mapping.poll()
                took = time.perf_counter() - began if self.batch_s is None else self.batch_s(queue, count)
                containers[slot] = now + took
                delivered += count
        return delivered

    def _next_event(self) -> float | None:
        now = self._clock.now()
        busy = [t for containers in self._busy_until.values() for t in containers if t > now]
        candidates = [t for t in (min(busy, default=None), self._next_visible()) if t is not None]
        # moto compares "now > visible_at" strictly, in milliseconds: wake just after.
        return min(candidates) + 0.002 if candidates else None
