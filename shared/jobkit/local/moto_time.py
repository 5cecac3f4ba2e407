"""moto on a virtual clock, faster receives, and when the next hidden message reappears.

Everything here reaches into moto's internals, so it is kept in one place:

- moto reads the time through ``moto.core.utils.utcnow`` (datetimes) and, in
  its SQS models, ``unix_time`` / ``unix_time_millis``; every visibility and
  delay decision goes through those. They are patched to read the clock.
- moto's SQS keeps a queue's messages in ``Queue._messages`` with their
  ``visible_at`` and ``delayed_until`` (milliseconds); that tells when the next
  one becomes receivable, so a drain can jump there instead of polling, and
  whether a queue has anything to receive, so empty queues are not polled.
- moto checks each received message's retention by computing *all* of the
  queue's attributes, three scans of the whole queue each: receiving is
  O(depth) per message. :func:`faster_receives` reads the one attribute it
  needs instead; the check is the same.
- moto measures the 12-hour limit on a message's visibility timeout from the
  time the message was *sent*, so a message older than 12 hours can never have
  its visibility changed again, not even to 0. AWS measures it from the receive.
  :func:`aws_visibility_limit` applies AWS's rule.
- moto's DynamoDB evaluates a conditional write's condition and applies the
  write in separate steps, with no lock: two threads can both pass the same
  condition (24 of 30 simultaneous double deliveries of a ``deliver_once``
  job ran twice). On AWS a conditional write is atomic.
  :func:`serial_dynamodb` runs moto's item operations one at a time, so a
  concurrency test means on moto what it means on AWS.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from jobkit.clock import VirtualClock


@contextlib.contextmanager
def moto_on_clock(clock: VirtualClock) -> Iterator[None]:
    import importlib

    moto_utils: Any = importlib.import_module("moto.core.utils")
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    originals = (moto_utils.utcnow, sqs_models.unix_time, sqs_models.unix_time_millis)
    unix_time, unix_time_millis = originals[1], originals[2]

    def fast_unix_time(dt: datetime | None = None) -> float:
        # SQS asks for the time once per message per scan: keep this cheap.
        return clock.now() if dt is None else unix_time(dt)

    def fast_unix_time_millis(dt: datetime | None = None) -> float:
        return clock.now() * 1000.0 if dt is None else unix_time_millis(dt)

    moto_utils.utcnow = lambda: datetime.fromtimestamp(clock.now(), UTC).replace(tzinfo=None)
    sqs_models.unix_time = fast_unix_time
    sqs_models.unix_time_millis = fast_unix_time_millis
    try:
        yield
    finally:
        moto_utils.utcnow, sqs_models.unix_time, sqs_models.unix_time_millis = originals


def next_visible_at(account_id: str, region: str, queue_names: Iterable[str], now: float) -> float | None:
    """When the next hidden or delayed message of these queues becomes receivable
    (epoch seconds), or None if none is waiting. Messages visible already are
    not waited for."""
    from moto.sqs.models import sqs_backends

    backend: Any = sqs_backends[account_id][region]
    times = []
    for name in queue_names:
        queue = backend.queues.get(name)
        for message in list(queue._messages) if queue else []:
            when = max(message.visible_at, message.delayed_until) / 1000
            if when >= now:
                times.append(when)
    return min(times) if times else None


@contextlib.contextmanager
def faster_receives() -> Iterator[None]:
    import importlib

    sqs_models: Any = importlib.import_module("moto.sqs.models")
    backend_class = sqs_models.SQSBackend
    original = backend_class.is_message_valid_based_on_retention_period

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention_period = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention_period + message.sent_timestamp / 1000 > sqs_models.unix_time())

    backend_class.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
    try:
        yield
    finally:
        backend_class.is_message_valid_based_on_retention_period = original


def has_receivable(account_id: str, region: str, queue_name: str, now: float) -> bool:
    """Whether a queue has a message that a receive would return now."""
    from moto.sqs.models import sqs_backends

    queue: Any = sqs_backends[account_id][region].queues.get(queue_name)
    now_ms = now * 1000
    return queue is not None and any(now_ms > m.visible_at and now_ms >= m.delayed_until for m in list(queue._messages))


#: moto's DynamoDB operations on items, each run under one lock by :func:`serial_dynamodb`.
_ITEM_OPERATIONS = (
    "put_item",
    "get_item",
    "query",
    "scan",
    "update_item",
    "delete_item",
    "transact_write_items",
    "execute_statement",
    "execute_transaction",
    "batch_execute_statement",
)


@contextlib.contextmanager
def serial_dynamodb() -> Iterator[None]:
    import importlib

    backend_class = importlib.import_module("moto.dynamodb.models").DynamoDBBackend
    lock = threading.RLock()
    originals = {name: getattr(backend_class, name) for name in _ITEM_OPERATIONS if hasattr(backend_class, name)}

    def serialised(operation: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return operation(self, *args, **kwargs)

        return run

    for name, operation in originals.items():
        setattr(backend_class, name, serialised(operation))
    try:
        yield
    finally:
        for name, operation in originals.items():
            setattr(backend_class, name, operation)


#: SQS's longest visibility timeout, counted from the receive.
_MAX_VISIBILITY_MS = 43_200 * 1000


@contextlib.contextmanager
def aws_visibility_limit() -> Iterator[None]:
    import importlib

    sqs_models: Any = importlib.import_module("moto.sqs.models")
    message_class, backend_class = sqs_models.Message, sqs_models.SQSBackend
    original_received, original_change = message_class.mark_received, backend_class.change_message_visibility

    def mark_received(self: Any, visibility_timeout: int | None = None) -> None:
        original_received(self, visibility_timeout)
        self.jobkit_received_at = sqs_models.unix_time_millis()

    def change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if message.had_receipt_handle(receipt_handle):
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
                return
        raise sqs_models.ReceiptHandleIsInvalid

    message_class.mark_received = mark_received
    backend_class.change_message_visibility = change_message_visibility
    try:
        yield
    finally:
        message_class.mark_received, backend_class.change_message_visibility = original_received, original_change
