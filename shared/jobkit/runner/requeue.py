"""Re-enqueueing a job as a new message: a delay hop, or a deferral while a twin runs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jobkit.core.outcome import Outcome, RecordResult
from jobkit.records.journal import AttemptJournal
from jobkit.runner.delivery import Delivery, QueuePort, string_attribute_of
from jobkit.runner.failures import Failures
from jobkit.sqs import (
    DEBOUNCE_ATTRIBUTE,
    DEFERRED_ATTRIBUTE,
    ENQUEUED_AT_ATTRIBUTE,
    number_attribute,
    string_attribute,
)

if TYPE_CHECKING:
    from jobkit.sqs.attributes import AttributeValue

log = logging.getLogger(__name__)


class Requeue:
    """Sends a job again as a new message: the same body, so the same enqueue
    time. Neither a hop nor a deferral is an attempt: the attempts made so far
    are recorded in the jobs table for the new message.

    Args:
        queues: SQS operations.
        journal: the attempt journal (none: attempt counts start again).
        failures: what a failed send becomes.
    """

    def __init__(self, queues: QueuePort, journal: AttemptJournal | None, failures: Failures) -> None:
        self._queues = queues
        self._journal = journal
        self._failures = failures

    def __call__(
        self,
        delivery: Delivery,
        delay_s: int,
        outcome: Outcome,
        why: str,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> RecordResult:
        """Send the job again in ``delay_s`` seconds, with the runner's
        ``attributes`` besides its own. A job registered with its debounce key
        stays registered (the attribute is carried). A send that fails leaves
        the message to come back (:meth:`Failures.requeue_failed`)."""
        try:
            self.send(delivery, delay_s, attributes)
        except Exception as exc:
            return self._failures.requeue_failed(delivery, exc, why)
        log.info("re-enqueued for %ss: %s", delay_s, why, extra=delivery.keys)
        return delivery.result(outcome, reason=why)

    def send(
        self,
        delivery: Delivery,
        delay_s: int,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        recounted: bool = False,
    ) -> str:
        """Send the job again, carrying the attempts it used (``delivery.attempt - 1``)
        and, once recounted, that its attempts were. Returns the new message's ID;
        raises what the send raised."""
        used = delivery.attempt - 1
        recounted = recounted or delivery.recounted
        # when SQS saw the job's first message: the copy's own send time is later
        seen = delivery.seen_at if delivery.seen_at is not None else delivery.spec.enqueued_at
        attributes = {ENQUEUED_AT_ATTRIBUTE: number_attribute(seen or 0.0), **(attributes or {})}
        registration = delivery.debounce_registration or string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE)
        if DEBOUNCE_ATTRIBUTE not in attributes and registration:
            attributes[DEBOUNCE_ATTRIBUTE] = string_attribute(registration)
        if (used or recounted) and self._journal is not None:
            attributes[DEFERRED_ATTRIBUTE] = string_attribute("1")
        message_id = self._queues.requeue(delivery.record, delay_s, attributes)
        if DEFERRED_ATTRIBUTE in attributes and self._journal is not None:
            self._journal.record_deferral(delivery.spec.type, message_id, used, recounted=recounted)
        return message_id
