"""When SQS first saw a job: the one clock that orders jobs by when they were pushed.

A job's body carries the producer's ``enqueuedAt``; SQS stamps each message
with its own ``SentTimestamp``. Every copy of a job (a delay hop, a deferral,
a hold, a debounce wait, a dead letter, a redrive) is a new message with a
later ``SentTimestamp``, so each copy carries the time SQS saw the *first*
message of the job in the ``jobkit.enqueuedAt`` attribute. A copy's carried
time is never taken as later than the copy's own ``SentTimestamp`` (no job was
first sent after a copy of it), so a sender that sets the attribute can only
make its own job look older.

Two times follow from it, and docs/reliability.md says which orders what:

- :func:`pushed_at`, the *ordering time*: the body's ``enqueuedAt``, capped at
  what SQS saw. Debounce orders by it. A copy that lost its attribute (an old
  dead letter, a native redrive of a message SQS moved itself) keeps its
  place, since the body goes with every copy.
- :func:`enqueued_at`, the *duplicate horizon*: the body's ``enqueuedAt``, but
  never earlier than what SQS saw. "Started after the job was enqueued"
  (``remove_duplicates``) counts from it, so a producer whose clock runs slow
  cannot make its job a duplicate of a run that began before the job existed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: The attribute every copy of a job carries: when SQS saw its first message (epoch seconds).
ENQUEUED_AT_ATTRIBUTE = "jobkit.enqueuedAt"


def first_seen_at(message: Mapping[str, Any]) -> float | None:
    """When SQS saw the job's first message, from a received message in
    either shape (Lambda's event record, or ReceiveMessage's): the carried
    attribute capped at the message's own ``SentTimestamp``, else that
    timestamp; ``None`` if the message says neither (a hand-made event)."""
    sent = sent_at(message)
    carried = _number(_attribute_text(message, ENQUEUED_AT_ATTRIBUTE))
    if carried is None:
        return sent
    return carried if sent is None else min(carried, sent)


def sent_at(message: Mapping[str, Any]) -> float | None:
    """This message's own ``SentTimestamp``, in seconds (``None`` if it has none)."""
    attributes = message.get("attributes", message.get("Attributes"))
    # (type() is dict first: received messages are dicts, and an ABC check costs ten times as much)
    sent_ms = (
        _number(attributes.get("SentTimestamp"))
        if type(attributes) is dict or isinstance(attributes, Mapping)
        else None
    )
    return sent_ms / 1000 if sent_ms is not None else None


def pushed_at(stamped: float | None, seen: float | None) -> float | None:
    """The ordering time: the producer's ``enqueuedAt``, capped at what SQS saw."""
    if stamped is None or seen is None:
        return stamped if seen is None else seen
    return min(stamped, seen)


def enqueued_at(stamped: float | None, seen: float | None) -> float | None:
    """The duplicate horizon: the producer's ``enqueuedAt``, but not earlier than what SQS saw."""
    if stamped is None or seen is None:
        return stamped if seen is None else seen
    return max(stamped, seen)


def _attribute_text(message: Mapping[str, Any], name: str) -> str | None:
    attributes = message.get("messageAttributes", message.get("MessageAttributes"))
    attribute = attributes.get(name) if type(attributes) is dict or isinstance(attributes, Mapping) else None
    if type(attribute) is not dict and not isinstance(attribute, Mapping):
        return None
    value = attribute.get("stringValue", attribute.get("StringValue"))
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None
