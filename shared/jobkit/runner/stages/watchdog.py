"""The deadline watchdog: records a job that is about to time out.

When Lambda's deadline passes, the runner is killed mid-job: nothing settles,
nothing is written, and the message comes back after its visibility timeout
with no trace of why. So before each run the runner arms an alarm shortly
before the deadline; if the job is still running when it goes off, the
watchdog writes a failure record (``JobTimedOut``, with the attempt) and, for
``track_status`` types, a ``timed_out`` status. The run disarms it when it
ends. An alarm that does not go off costs no request.
"""

from __future__ import annotations

import logging
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
    """Arms one alarm per run.

    Args:
        clock: the alarms' clock.
        record: writes a failure record (the store's ``record_failure``).
    """

    def __init__(self, clock: Clock, record: Callable[[FailureRecord], object]) -> None:
        self._clock = clock
        self._record = record

    def watch(
        self,
        failure: Callable[[float, str], FailureRecord],
        *,
        deadline: float,
        timeout_s: float,
        on_fire: Callable[[float, str], object],
        keys: dict[str, object],
    ) -> Alarm:
        """Arm the alarm for one run.

        Args:
            failure: makes the failure record, given the time and the message.
            deadline: when Lambda will stop the invocation (epoch seconds).
            timeout_s: the function's timeout, for the margin and the message.
            on_fire: also called when it goes off (the status tracker's ``timed_out``).
            keys: log keys of the job.
        """
        margin = margin_s(timeout_s)

        def fire() -> None:
            now = self._clock.now()
            message = (
                f"still running {max(0.0, deadline - now):.1f} s before the Lambda deadline"
                f" (timeout {timeout_s:g} s): the invocation is about to be stopped"
            )
            log.error("job about to time out: %s", message, extra=keys)
            self._record(failure(now, message))
            on_fire(now, f"{TIMED_OUT}: {message}")

        return self._clock.call_at(deadline - margin, fire)


class Watchdog(Stage):
    """The watchdog as a stage: armed when a job starts inside Lambda, disarmed when it ends.

    Args:
        watchdog: the alarms.
        timeout_s: the function's timeout (the queue's).
    """

    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Watchdog:
        record = kit.journal.record_failure if kit.journal is not None else _no_record
        return cls(DeadlineWatchdog(kit.clock, record), kit.queue.timeout_s)

    def __init__(self, watchdog: DeadlineWatchdog, timeout_s: float) -> None:
        self._watchdog = watchdog
        self._timeout_s = timeout_s

    def start(self, delivery: Delivery, run: Run) -> None:
        if delivery.context is None:
            return
        spec = delivery.spec

        def failure(at: float, message: str) -> FailureRecord:
            return FailureRecord(
                spec.id,
                spec.type,
                spec.domain,
                delivery.attempt,
                at,
                TIMED_OUT,
                message,
                "",
                correlation_id=delivery.correlation_id,
            )

        alarm = self._watchdog.watch(
            failure,
            deadline=run.started_at + delivery.remaining_s(self._timeout_s),
            timeout_s=self._timeout_s,
            on_fire=lambda at, error: delivery.status.timed_out(at, error),
            keys=delivery.keys,
        )
        run.when_done(alarm.cancel)


def _no_record(_: object) -> None:
    """Without the jobs table, the watchdog only logs."""
