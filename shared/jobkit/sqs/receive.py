"""Receiving: one ReceiveMessage with everything a message carries, and the
loop that receives from a queue until it has nothing new."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jobkit.sqs.limits import MAX_BATCH_ENTRIES

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

#: One receive: asked for up to so many messages (at most 10), returns those received.
Receive = Callable[[int], list["MessageTypeDef"]]


def receive_messages(
    sqs: SQSClient,
    queue_url: str,
    max_messages: int = MAX_BATCH_ENTRIES,
    *,
    visibility_timeout_s: int | None = None,
    wait_time_s: int | None = None,
) -> list[MessageTypeDef]:
    """One ReceiveMessage of up to ``max_messages`` (at most 10), with every
    message and system attribute. A timeout left out is the queue's own."""
    request: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MaxNumberOfMessages": min(MAX_BATCH_ENTRIES, max_messages),
        "MessageAttributeNames": ["All"],
        "MessageSystemAttributeNames": ["All"],
    }
    if visibility_timeout_s is not None:
        request["VisibilityTimeout"] = visibility_timeout_s
    if wait_time_s is not None:
        request["WaitTimeSeconds"] = wait_time_s
    return sqs.receive_message(**request).get("Messages", [])


def new_messages(
    receive: Receive,
    *,
    limit: int | None = None,
    seen: set[str] | None = None,
    expected: int = 0,
    max_fruitless: int = 1,
) -> Iterator[list[MessageTypeDef]]:
    """Batches of messages not received before, one per ``receive`` (asked for
    at most 10, and no more than ``limit`` less those seen).

    It stops at ``limit`` distinct messages, or when a receive brings nothing
    new and either ``expected`` messages were seen or ``max_fruitless``
    receives in a row brought nothing new: by default, at the first receive
    that brings nothing new. ``seen`` collects the message IDs (pass a set of
    your own to keep it).
    """
    seen = set() if seen is None else seen
    fruitless = 0
    while limit is None or len(seen) < limit:
        wanted = MAX_BATCH_ENTRIES if limit is None else min(MAX_BATCH_ENTRIES, limit - len(seen))
        fresh = [message for message in receive(wanted) if message["MessageId"] not in seen]
        if fresh:
            fruitless = 0
            seen.update(message["MessageId"] for message in fresh)
            yield fresh
            continue
        fruitless += 1
        if len(seen) >= expected or fruitless >= max_fruitless:
            return
