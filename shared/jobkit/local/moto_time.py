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
- moto's SQS publishes no CloudWatch metrics. :func:`counting_sends` counts
  the messages each queue accepts (what ``NumberOfMessagesSent`` counts), and
  :func:`oldest_message_age` reads what ``ApproximateAgeOfOldestMessage``
  reports, so the local stack can publish them itself.
- moto's CloudWatch computes no percentile: GetMetricData answers ``p95``
  with a null value (and boto3 then fails to read the response).
  :func:`cloudwatch_percentiles` computes ``pNN`` statistics from the raw
  values, nearest-rank; AWS's are approximations from a sketch, within a few
  percent. As on AWS, values sent as statistic sets have no percentiles.
- moto's CloudWatch keeps every datapoint for ever, and GetMetricData scans
  them all. :func:`drop_metric_data_before` forgets the old ones.

Other differences of moto's CloudWatch that a reader of its metrics should know:

- GetMetricData cuts periods from ``StartTime`` to the second; AWS rounds a
  recent ``StartTime`` down to the minute, and keeps datapoints sent at
  standard resolution per minute (so AWS's first period can hold up to a
  minute more).
- A query that names dimensions matches datapoints of any namespace with
  that metric name and those dimensions; AWS matches the namespace too.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections import Counter
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
    import importlib

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


_PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?|100)")


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile (0 < p <= 100), or None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


@contextlib.contextmanager
def cloudwatch_percentiles() -> Iterator[None]:
    import importlib

    statistics_class = importlib.import_module("moto.cloudwatch.models").Statistics
    original = statistics_class.get_statistics_for_type

    def get_statistics_for_type(self: Any, stat: str) -> Any:
        match = _PERCENTILE.fullmatch(stat)
        if match is None or float(match[1]) == 0:
            return original(self, stat)
        return percentile(self.metric_single_values_list, float(match[1]))

    statistics_class.get_statistics_for_type = get_statistics_for_type
    try:
        yield
    finally:
        statistics_class.get_statistics_for_type = original


def drop_metric_data_before(account_id: str, region: str, when: float) -> int:
    """Forget the datapoints of moto's CloudWatch stamped before ``when``
    (epoch seconds), from the front of its list, where they arrive in time
    order; one sent late with an old stamp stays. Returns how many were dropped.

    The list is cut in place, in one step, so a datapoint that another thread
    appends meanwhile is kept."""
    from moto.cloudwatch.models import cloudwatch_backends

    data: list[Any] = cloudwatch_backends[account_id][region].metric_data
    cutoff = datetime.fromtimestamp(when, UTC)
    naive_cutoff = cutoff.replace(tzinfo=None)
    count = 0
    for datum in data:  # stops at the first recent one
        stamp = datum.timestamp
        if stamp >= (naive_cutoff if stamp.tzinfo is None else cutoff):
            break
        count += 1
    if count:
        del data[:count]
    return count
