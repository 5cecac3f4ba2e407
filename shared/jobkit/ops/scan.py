"""Reading every message of a queue without consuming it.

SQS has no "peek": a message can only be read by receiving it, which hides it
for a visibility timeout. :class:`QueueScan` receives with a short timeout,
remembers what it holds, and makes every message it did not delete visible
again (``ChangeMessageVisibility`` 0) when it ends, even when interrupted; a
message it could not release comes back on its own when the short timeout
ends. Receiving counts as a receive, so scan DLQs only: a source queue's
redrive policy would count the scan against the job's attempts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from jobkit.sqs import new_messages, receive_messages, release_in_chunks

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = logging.getLogger(__name__)

#: How long a scanned message stays hidden if the scan cannot release it.
PEEK_VISIBILITY_S = 30
#: Receives that bring nothing new before the scan gives up on messages the
#: queue's approximate count promised (another consumer may hold them).
MAX_FRUITLESS_RECEIVES = 3


class QueueScan:
    """Receives each message of a queue once, and releases what it did not delete.

    ::

        with QueueScan(sqs, dlq_url) as scan:
            for batch in scan.batches():
                ...
                scan.forget(deleted)  # messages deleted: nothing to release

    Args:
        sqs: a boto3 SQS client.
        queue_url: the queue (a DLQ).
        visibility_timeout_s: how long each received message is hidden.
        limit: stop after this many distinct messages.
    """

    def __init__(
        self, sqs: SQSClient, queue_url: str, *, visibility_timeout_s: int = PEEK_VISIBILITY_S, limit: int | None = None
    ) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._visibility_timeout_s = visibility_timeout_s
        self._limit = limit
        self._held: dict[str, str] = {}  # message ID -> latest receipt handle
        self._approximate_count: int | None = None
        self.seen: set[str] = set()

    def __enter__(self) -> QueueScan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def approximate_count(self) -> int:
        """The queue's visible messages when the scan started, as SQS estimates them."""
        if self._approximate_count is None:
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self._url, AttributeNames=["ApproximateNumberOfMessages"]
            )
            self._approximate_count = int(attributes["Attributes"]["ApproximateNumberOfMessages"])
        return self._approximate_count

    def batches(self) -> Iterator[list[MessageTypeDef]]:
        """Batches of messages not seen before, until the queue has no more.

        Short polls only (a long poll would wait on an empty queue): the scan
        ends when a receive brings nothing new and the messages SQS counted
        at the start were all seen, or after a few fruitless receives.
        """
        yield from new_messages(
            self._receive,
            limit=self._limit,
            seen=self.seen,
            expected=self.approximate_count(),
            max_fruitless=MAX_FRUITLESS_RECEIVES,
        )

    def _receive(self, wanted: int) -> list[MessageTypeDef]:
        received = receive_messages(
            self._sqs, self._url, wanted, visibility_timeout_s=self._visibility_timeout_s, wait_time_s=0
        )
        for message in received:
            # A message seen before came back (its timeout ended): hold its newest handle.
            self._held[message["MessageId"]] = message["ReceiptHandle"]
        return received

    def forget(self, message_ids: Iterable[str]) -> None:
        """Stop holding messages (they were deleted)."""
        for message_id in message_ids:
            self._held.pop(message_id, None)

    def release(self, message_ids: Iterable[str] | None = None) -> None:
        """Make held messages (default: all) visible again."""
        ids = list(self._held) if message_ids is None else [i for i in message_ids if i in self._held]
        for chunk in release_in_chunks(self._sqs, self._url, ids, self._held.__getitem__, catching=(Exception,)):
            if chunk.error is not None:
                # They become visible anyway when the short timeout ends.
                log.warning(
                    "could not release %d message(s); they return within %ss",
                    len(chunk.items),
                    self._visibility_timeout_s,
                )
                continue
            for message_id, error in chunk.failed:
                log.debug("release failed for %s: %s", message_id, error)
            self.forget(chunk.items)


def string_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Received message attributes (SQS's shape) that have string values, by name."""
    return {
        name: value["StringValue"] for name, value in attributes.items() if isinstance(value.get("StringValue"), str)
    }
