"""Metrics: every record's result goes to the metrics port (EMF per job type)
when the batch is done, as one flush. An invocation that dies mid-batch emits
nothing, as Lambda would. Metrics never fail a job."""

from __future__ import annotations

import logging

from jobkit.outcome import RecordResult
from jobkit.runner.delivery import Delivery, MetricsPort
from jobkit.runner.stage import Stage

log = logging.getLogger(__name__)


class Metrics(Stage):
    def __init__(self, metrics: MetricsPort) -> None:
        self._metrics = metrics
        self._batch: list[RecordResult] = []

    def begin_batch(self) -> None:
        self._batch = []  # what an invocation that died mid-batch collected is never emitted

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        self._batch.append(result)

    def end_batch(self) -> None:
        batch, self._batch = self._batch, []
        try:
            for result in batch:
                self._metrics.record(result)
            self._metrics.flush()
        except Exception:
            log.warning("could not emit metrics", exc_info=True)
