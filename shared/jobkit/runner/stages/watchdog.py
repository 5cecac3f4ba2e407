"""The deadline watchdog: records a job that is about to time out.

When Lambda's deadline passes, the runner is killed mid-job: nothing settles,
nothing is written, and the message comes back after its visibility timeout
with no trace of why. So when a batch's first job starts, the runner arms an
alarm shortly before the deadline; if a job is still running when it goes off, the
watchdog writes a failure record (``JobTimedOut``, with the attempt) and, for
``track_status`` types, a ``timed_out`` status, for each job still running.
One alarm serves a batch (its jobs share the invocation's deadline); a job
leaves its list when its run ends. An alarm that does not go off costs no
request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from jobkit.core.clock import Alarm, Clock
from jobkit.records import TIMED_OUT, FailureRecord
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Run, Stage

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


def margin_s(timeout_s: float) -> float:
    """How long before the deadline the alarm goes off: a tenth of the timeout,
    at most 2 s (enough for one write, even one that builds its client)."""
    return min(2.0, max(0.05, timeout_s / 10))


class DeadlineWatchdog:
    """The alarm, and what it does when it goes off.

    Args:
        clock: the alarms' clock.
        record: writes a failure record (the store's ``record_failure``).
    """

    def __init__(self, clock: Clock, record: Callable[[FailureRecord], object]) -> None:
        self._clock = clock
        self._record = record

    def arm(self, deadline: float, timeout_s: float, running: Callable[[], list[Delivery]]) -> Alarm:
        """Arm one alarm for an invocation whose deadline is ``deadline`` (epoch
        seconds): when it goes off, each job that ``running()`` names is recorded."""

        def fire() -> None:
            now = self._clock.now()
            message = (
                f"still running {max(0.0, deadline - now):.1f} s before the Lambda deadline"
                f" (timeout {timeout_s:g} s): the invocation is about to be stopped"
            )
            for delivery in running():
                try:
                    self._timed_out(delivery, now, message)
                except Exception:  # one job's record that cannot be written leaves the others' to write
                    log.exception("could not record a job about to time out", extra=delivery.keys)

        return self._clock.call_at(deadline - margin_s(timeout_s), fire)

    def _timed_out(self, delivery: Delivery, now: float, message: str) -> None:
        spec = delivery.spec
        log.error("job about to time out: %s", message, extra=delivery.keys)
        failure = FailureRecord(
            spec.id,
            spec.type,
            spec.domain,
            delivery.attempt,
            now,
            TIMED_OUT,
            message,
            "",
            correlation_id=delivery.correlation_id,
        )
        try:
            self._record(failure)
        finally:
            delivery.status.timed_out(now, f"{TIMED_OUT}: {message}")


class Watchdog(Stage):
    """The watchdog as a stage: one alarm per batch inside Lambda, armed when its
    first job starts (every job of an invocation has its deadline), which names
    the jobs still running when it goes off; each job leaves that list when
    its run ends.

    Args:
        watchdog: the alarm.
        timeout_s: the function's timeout (the queue's).
    """

    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Watchdog:
        record = kit.journal.record_failure if kit.journal is not None else _no_record
        return cls(DeadlineWatchdog(kit.clock, record), kit.queue.timeout_s)

    def __init__(self, watchdog: DeadlineWatchdog, timeout_s: float) -> None:
        self._watchdog = watchdog
        self._timeout_s = timeout_s
        self._lock = threading.Lock()  # jobs of a batch may run side by side
        self._running: dict[int, Delivery] = {}  # by the run's id
        self._alarm: Alarm | None = None

    def begin_batch(self) -> None:
        self._disarm()  # a batch that died mid-way left its alarm

    def start(self, delivery: Delivery, run: Run) -> None:
        if delivery.context is None:
            return
        key = id(run)
        with self._lock:
            self._running[key] = delivery
            if self._alarm is None:
                deadline = run.started_at + delivery.remaining_s(self._timeout_s)
                self._alarm = self._watchdog.arm(deadline, self._timeout_s, self._still_running)
        run.when_done(lambda: self._ended(key))

    def end_batch(self) -> None:
        self._disarm()

    def _still_running(self) -> list[Delivery]:
        with self._lock:
            return list(self._running.values())

    def _ended(self, key: int) -> None:
        with self._lock:
            self._running.pop(key, None)

    def _disarm(self) -> None:
        with self._lock:
            if self._alarm is not None:
                self._alarm.cancel()
            self._alarm, self._running = None, {}


def _no_record(_: object) -> None:
    """Without the jobs table, the watchdog only logs."""
