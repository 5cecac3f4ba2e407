"""Metrics: every record's result goes to the metrics port (EMF per job type)
when the batch is done, as one flush. An invocation that dies mid-batch emits
nothing, as Lambda would. Metrics never fail a job. This stage ends the batch
last, so it also counts what the other stages learned at its end (a settle
that found the records store unavailable)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from jobkit.core.outcome import RecordResult
from jobkit.runner.delivery import Delivery, MetricsPort
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class Metrics(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Metrics:
        return cls(kit.metrics_port)

    def __init__(self, metrics: MetricsPort) -> None:
        self._metrics = metrics
        self._batch: list[tuple[Delivery | None, RecordResult]] = []

    def begin_batch(self) -> None:
        self._batch = []  # what an invocation that died mid-batch collected is never emitted

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        self._batch.append((delivery, result))

    def end_batch(self) -> None:
        batch, self._batch = self._batch, []
        try:
            for delivery, result in batch:
                if delivery is not None and delivery.dedup_unavailable and not result.dedup_unavailable:
                    result = replace(result, dedup_unavailable=True)
                self._metrics.record(result)
            self._metrics.flush()
        except Exception:
            log.warning("could not emit metrics", exc_info=True)
