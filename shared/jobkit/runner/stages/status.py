"""Job status for ``track_status`` types: ``running`` when an attempt starts,
then what the result's outcome says (:attr:`jobkit.core.outcome.Outcome.status`):
``succeeded``, ``failed`` (and whether it will be retried), ``skipped`` (a
duplicate, superseded, or debounced) or ``cancelled``. Other types get the tracker that writes nothing,
and cost no request. See :mod:`jobkit.status.tracker`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import RecordResult
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Run, Stage
from jobkit.status.tracker import NO_STATUS, RecordingStatusTracker

if TYPE_CHECKING:
    from jobkit.records.store import Records
    from jobkit.runner.stages import Parts, StageKit


class Status(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Status:
        return cls(kit.records, kit.clock)

    def __init__(self, records: Records | None, clock: Clock) -> None:
        self._records = records
        self._clock = clock

    def admit(self, delivery: Delivery) -> RecordResult | None:
        if delivery.job_type.track_status and self._records is not None:
            delivery.status = RecordingStatusTracker(
                self._records,
                delivery.spec,
                delivery.attempt,
                self._clock,
                delivery.correlation_id,
                enqueued_at=delivery.stamped_at,
            )
        return None

    def start(self, delivery: Delivery, run: Run) -> None:
        if delivery.status is not NO_STATUS:
            delivery.status.started(run.started_at)

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        if delivery is None or delivery.status is NO_STATUS:  # (the canary tracks its status, in every runner)
            return
        now = self._clock.now()
        status = result.status  # each outcome says what it means for the status (jobkit.core.outcome)
        if status == "succeeded":
            delivery.status.succeeded(now)
        elif status == "skipped":
            delivery.status.skipped(now, f"{result.outcome}: {result.reason}")
        elif status == "dead_lettered":
            delivery.status.dead_lettered(now, result.error or "", result.reason or "dead-lettered")
        elif status == "cancelled":
            delivery.status.cancelled(now, result.reason or "cancelled")
        elif status == "failed":
            delivery.status.failed(now, result.error or "", will_retry=not result.outcome.is_final)
