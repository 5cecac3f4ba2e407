"""Re-enqueueing a job as a new message: a delay hop, or a deferral while a twin runs."""

from __future__ import annotations

import logging

from jobkit.dedup import DedupStore
from jobkit.error_text import describe
from jobkit.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery, QueuePort
from jobkit.sqs import DEFERRED_ATTRIBUTE, ENQUEUED_AT_ATTRIBUTE, number_attribute, string_attribute

log = logging.getLogger(__name__)


class Requeue:
    """Sends a job again as a new message: the same body, so the same enqueue
    time. Neither a hop nor a deferral is an attempt: the attempts made so far
    are recorded in the jobs table for the new message.

    Args:
        queues: SQS operations.
        dedup: the records store (none: attempt counts start again).
    """

    def __init__(self, queues: QueuePort, dedup: DedupStore | None) -> None:
        self._queues = queues
        self._dedup = dedup

    def __call__(self, delivery: Delivery, delay_s: int, outcome: Outcome, why: str) -> RecordResult:
        used = delivery.attempt - 1
        attributes = {ENQUEUED_AT_ATTRIBUTE: number_attribute(delivery.spec.enqueued_at or 0.0)}
        if used and self._dedup is not None:
            attributes[DEFERRED_ATTRIBUTE] = string_attribute("1")
        try:
            message_id = self._queues.requeue(delivery.record, delay_s, attributes)
        except Exception as exc:
            # The message stays; it comes back after its visibility timeout.
            log.warning(
                "could not re-enqueue (%s); the message will be redelivered", why, exc_info=True, extra=delivery.keys
            )
            return delivery.result(Outcome.RETRIED, error=describe(exc, str(exc)), reason=why, exception=exc)
        if DEFERRED_ATTRIBUTE in attributes and self._dedup is not None:
            self._dedup.record_deferral(delivery.spec.type, message_id, used)
        log.info("re-enqueued for %ss: %s", delay_s, why, extra=delivery.keys)
        return delivery.result(outcome, reason=why)
