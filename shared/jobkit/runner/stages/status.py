"""Job status for ``track_status`` types: ``running`` when an attempt starts,
then ``succeeded``, ``failed`` (and whether it will be retried) or ``skipped``
(a duplicate, or superseded). Other types get the tracker that writes nothing,
and cost no request. See :mod:`jobkit.status.tracker`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobkit.clock import Clock
from jobkit.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Run, Stage
from jobkit.status.tracker import RecordingStatusTracker

if TYPE_CHECKING:
    from jobkit.records.store import Records

_SKIPPED = (Outcome.DUPLICATE, Outcome.SUPERSEDED)  # a redelivery's status already says it succeeded


class Status(Stage):
    def __init__(self, records: Records | None, clock: Clock) -> None:
        self._records = records
        self._clock = clock

    def admit(self, delivery: Delivery) -> RecordResult | None:
        if delivery.job_type.track_status and self._records is not None:
            delivery.status = RecordingStatusTracker(
                self._records, delivery.spec, delivery.attempt, self._clock, delivery.correlation_id
            )
        return None

    def start(self, delivery: Delivery, run: Run) -> None:
        delivery.status.started(run.started_at)

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        if delivery is None:
            return
        now = self._clock.now()
        if result.outcome is Outcome.SUCCEEDED:
            delivery.status.succeeded(now)
        elif result.outcome in _SKIPPED:
            delivery.status.skipped(now, f"{result.outcome}: {result.reason}")
        elif result.outcome is Outcome.DEAD_LETTERED or (result.outcome is Outcome.RETRIED and result.reason is None):
            # a re-enqueue that failed (a reason, and retried) leaves the status as it was: the job did not run
            delivery.status.failed(now, result.error or "", will_retry=result.outcome is Outcome.RETRIED)
