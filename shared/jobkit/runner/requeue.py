"""Re-enqueueing a job as a new message: a delay hop, or a deferral while a twin runs."""

from __future__ import annotations

import logging

from jobkit.dedup import DedupStore
from jobkit.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery, QueuePort
from jobkit.runner.failures import Failures
from jobkit.sqs import DEFERRED_ATTRIBUTE, ENQUEUED_AT_ATTRIBUTE, number_attribute, string_attribute

log = logging.getLogger(__name__)


class Requeue:
    """Sends a job again as a new message: the same body, so the same enqueue
    time. Neither a hop nor a deferral is an attempt: the attempts made so far
    are recorded in the jobs table for the new message.

    Args:
        queues: SQS operations.
        dedup: the records store (none: attempt counts start again).
        failures: what a failed send becomes.
    """

    def __init__(self, queues: QueuePort, dedup: DedupStore | None, failures: Failures) -> None:
        self._queues = queues
        self._dedup = dedup
        self._failures = failures

    def __call__(self, delivery: Delivery, delay_s: int, outcome: Outcome, why: str) -> RecordResult:
        used = delivery.attempt - 1
        attributes = {ENQUEUED_AT_ATTRIBUTE: number_attribute(delivery.spec.enqueued_at or 0.0)}
        if used and self._dedup is not None:
            attributes[DEFERRED_ATTRIBUTE] = string_attribute("1")
        try:
            message_id = self._queues.requeue(delivery.record, delay_s, attributes)
        except Exception as exc:
            return self._failures.requeue_failed(delivery, exc, why)
        if DEFERRED_ATTRIBUTE in attributes and self._dedup is not None:
            self._dedup.record_deferral(delivery.spec.type, message_id, used)
        log.info("re-enqueued for %ss: %s", delay_s, why, extra=delivery.keys)
        return delivery.result(outcome, reason=why)
