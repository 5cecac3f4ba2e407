"""SQS rules and figures moto lacks: the 12-hour visibility limit counted from
the receive (:func:`aws_visibility_limit`), the messages each queue accepts
(:func:`counting_sends`) and the age of its oldest message
(:func:`oldest_message_age`)."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from jobkit.local.moto_patches.sqs_index import message_with_handle

#: SQS's longest visibility timeout, counted from the receive.
_MAX_VISIBILITY_MS = 43_200 * 1000


@contextlib.contextmanager
def aws_visibility_limit() -> Iterator[None]:
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    message_class, backend_class = sqs_models.Message, sqs_models.SQSBackend
    original_received, original_change = message_class.mark_received, backend_class.change_message_visibility

    def mark_received(self: Any, visibility_timeout: int | None = None) -> None:
        original_received(self, visibility_timeout)
        self.jobkit_received_at = sqs_models.unix_time_millis()

    def change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
        queue = self.get_queue(queue_name)
        message = message_with_handle(queue, receipt_handle)
        if message is None:
            raise sqs_models.ReceiptHandleIsInvalid
        received_at = getattr(message, "jobkit_received_at", message.sent_timestamp)
        until = sqs_models.unix_time_millis() + int(visibility_timeout) * 1000
        if until - received_at > _MAX_VISIBILITY_MS:
            raise sqs_models.InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]"
            )
        message.change_visibility(visibility_timeout)
        if message.visible and message in queue.pending_messages:
            queue.pending_messages.remove(message)

    message_class.mark_received = mark_received
    backend_class.change_message_visibility = change_message_visibility
    try:
        yield
    finally:
        message_class.mark_received, backend_class.change_message_visibility = original_received, original_change


class SentCounts:
    """Messages accepted per SQS queue name since the last :meth:`take`, from
    any client of the emulated SQS (another process's too, through the server)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, queue_name: str) -> None:
        with self._lock:
            self._counts[queue_name] += 1

    def take(self) -> Counter[str]:
        """The counts so far, and start again from zero."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
        return counts


@contextlib.contextmanager
def counting_sends(counts: SentCounts) -> Iterator[None]:
    """Count every message SQS accepts into ``counts``: SendMessage and each
    entry of SendMessageBatch (moto sends a batch's entries one by one). As
    with AWS's ``NumberOfMessagesSent``, SQS's own moves to a DLQ are not sends."""
    backend_class = importlib.import_module("moto.sqs.models").SQSBackend
    original = backend_class.send_message

    def send_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        message = original(self, queue_name, *args, **kwargs)
        counts.add(queue_name)
        return message

    backend_class.send_message = send_message
    try:
        yield
    finally:
        backend_class.send_message = original


#: SQS's ApproximateAgeOfOldestMessage passes over messages received this many times.
_AGE_RECEIVE_LIMIT = 3


def oldest_message_age(account_id: str, region: str, queue_name: str, now: float) -> float | None:
    """What SQS's ``ApproximateAgeOfOldestMessage`` reports for a queue, in
    seconds: the age of its oldest message not yet deleted (in flight and
    delayed ones included), passing over messages received three times or more
    unless there are only such. ``None`` when the queue is empty."""
    from moto.sqs.models import sqs_backends

    queue: Any = sqs_backends[account_id][region].queues.get(queue_name)
    messages = list(queue._messages) if queue is not None else []
    if not messages:
        return None
    fresh = [m for m in messages if m.approximate_receive_count < _AGE_RECEIVE_LIMIT] or messages
    oldest_ms: float = min(m.sent_timestamp for m in fresh)
    return max(0.0, now - oldest_ms / 1000)
