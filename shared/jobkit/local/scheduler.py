"""EventBridge Scheduler on the local stack: the declaration's schedules fire on
the stack's clock, each firing one job sent straight to its type's queue, with
the body the deployed schedule sends (:func:`jobkit.declaration.schedules.fired_body`): its
own job ID from a new execution ID, its scheduled time as ``enqueuedAt``, and
no message attributes.

So a test on a virtual clock can run a day of a schedule in a moment:
``stack.drain(until=start + 86400)`` fires each firing of the day as the clock
passes it. A firing the clock jumped over is fired late, as the scheduler
would have fired it on time. Locally a flexible window fires at its start, and
a rate schedule first fires one period after the stack started. A cron with
``L``, ``W`` or ``#`` (valid on AWS) does not fire locally: a warning says so.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping

from jobkit.core.cron import CronNotSupported, iso_utc, next_firing
from jobkit.declaration.schedules import Schedule, fired_body

log = logging.getLogger(__name__)

#: Firings one call fires at most (a clock moved years ahead of a per-minute schedule).
MAX_FIRINGS_PER_CALL = 100_000


class LocalScheduler:
    """Fires schedules through ``send(type, body)`` as the clock reaches them."""

    def __init__(self, schedules: Mapping[str, Schedule], send: Callable[[str, str], None], started: float) -> None:
        self._schedules = dict(schedules)
        self._send = send
        self._started = started
        self._unsupported: set[str] = set()
        self._next = {name: self._after(s, started) for name, s in self._schedules.items()}
        self.fired: list[tuple[str, str, float]] = []  # (schedule, job ID, scheduled time)

    def _after(self, schedule: Schedule, when: float) -> float | None:
        try:
            return next_firing(schedule.cron, schedule.rate, schedule.timezone, when, self._started)
        except CronNotSupported as exc:  # valid on AWS; not fired here, and the stack goes on
            if schedule.name not in self._unsupported:
                self._unsupported.add(schedule.name)
                log.warning("schedule %s does not fire on the local stack: %s", schedule.name, exc)
            return None

    def next_due(self) -> float | None:
        """When the next firing is due, or None."""
        due = [at for at in self._next.values() if at is not None]
        return min(due) if due else None

    def fire_due(self, now: float) -> int:
        """Fire every firing due by ``now``, in time order; returns how many."""
        fired = 0
        while fired < MAX_FIRINGS_PER_CALL:
            name, at = min(
                ((n, a) for n, a in self._next.items() if a is not None), key=lambda item: item[1], default=(None, None)
            )
            if name is None or at is None or at > now:
                break
            schedule = self._schedules[name]
            execution_id = uuid.uuid4().hex[:16]
            self._send(schedule.type, fired_body(schedule, execution_id, iso_utc(at)))
            self.fired.append((name, "sched-" + execution_id, at))
            self._next[name] = self._after(schedule, at)
            fired += 1
        return fired
