"""Batch requests: packing messages into SendMessageBatch requests and sending
them, and deleting or releasing received messages ten at a time.

A batch request can succeed for some entries and fail for others. Every
function here says which were which, and leaves what to do about a failure
to its caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jobkit.sqs.limits import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, message_size

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

    from jobkit.sqs.attributes import AttributeValue

T = TypeVar("T")

#: Error codes worth another try: throttling and server-side faults.
RETRYABLE_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "KMS.ThrottlingException",
        "KmsThrottled",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
    }
)


def is_retryable(code: str, http_status: int | None = None) -> bool:
    return code in RETRYABLE_CODES or (http_status is not None and http_status >= 500)


# -- sending -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing(Generic[T]):
    """A message to send, with the sender's own handle on it (``item``: a job
    spec, a dead letter). ``delay_s`` None leaves the delay to the queue;
    ``group_id`` None sends no ``MessageGroupId`` (on a standard queue, the
    tenant an SQS fair queue counts it in: see :mod:`jobkit.flow.fairness`).
    ``system_attributes``: SQS's ``MessageSystemAttributes`` (the X-Ray trace
    header), which SQS neither counts in the size nor among the 10 attributes."""

    item: T
    queue_url: str
    body: str
    attributes: dict[str, AttributeValue]
    delay_s: int | None = None
    group_id: str | None = None
    system_attributes: dict[str, Any] = field(default_factory=dict)
    size: int = field(default=-1, repr=False, compare=False)  # bytes SQS counts; computed unless given

    def __post_init__(self) -> None:
        if self.size < 0:
            object.__setattr__(self, "size", message_size(self.body, self.attributes))

    def entry(self, entry_id: str) -> SendMessageBatchRequestEntryTypeDef:
        """The message as a SendMessageBatch entry."""
        entry: SendMessageBatchRequestEntryTypeDef = {
            "Id": entry_id,
            "MessageBody": self.body,
            "MessageAttributes": self.attributes,
        }
        if self.delay_s is not None:
            entry["DelaySeconds"] = self.delay_s
        if self.group_id is not None:
            entry["MessageGroupId"] = self.group_id
        if self.system_attributes:
            entry["MessageSystemAttributes"] = self.system_attributes  # type: ignore[typeddict-item]
        return entry


@dataclass(frozen=True)
class SendFailure(Generic[T]):
    """A message SQS did not take: its error code and text, whether another
    try may do better, and the exception if the whole request failed."""

    outgoing: Outgoing[T]
    code: str
    error: str
    retryable: bool
    exception: Exception | None = None


@dataclass
class SendResult(Generic[T]):
    """What a send did: the messages sent, and those not sent."""

    sent: list[Outgoing[T]] = field(default_factory=list)
    failed: list[SendFailure[T]] = field(default_factory=list)


def pack_batches(
    messages: Sequence[Outgoing[T]], *, max_entries: int = MAX_BATCH_ENTRIES, max_bytes: int = MAX_BATCH_BYTES
) -> list[list[Outgoing[T]]]:
    """Group messages into SendMessageBatch requests: one queue per request, at
    most ``max_entries`` entries and ``max_bytes`` bytes (attributes included)
    each, in the given order."""
    open_batches: dict[str, tuple[list[Outgoing[T]], int]] = {}
    batches: list[list[Outgoing[T]]] = []
    for message in messages:
        batch, size = open_batches.get(message.queue_url, ([], 0))
        if batch and (len(batch) == max_entries or size + message.size > max_bytes):
            batches.append(batch)
            batch, size = [], 0
        batch.append(message)
        open_batches[message.queue_url] = (batch, size + message.size)
    batches.extend(batch for batch, _ in open_batches.values() if batch)
    return batches


def send_batch(sqs: SQSClient, batch: Sequence[Outgoing[T]]) -> SendResult[T]:
    """One SendMessageBatch request of messages to one queue (see :func:`pack_batches`).

    A request that fails whole fails every message: worth another try after
    throttling, a server fault or a connection error, not otherwise. A
    message SQS refuses is worth another try unless SQS blames the sender.
    Other exceptions propagate.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    request = [message.entry(str(n)) for n, message in enumerate(batch)]
    try:
        response = sqs.send_message_batch(QueueUrl=batch[0].queue_url, Entries=request)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, text = error.get("Code", "ClientError"), error.get("Message", str(exc))
        retryable = is_retryable(code, exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode"))
        return SendResult([], [SendFailure(message, code, text, retryable, exc) for message in batch])
    except BotoCoreError as exc:  # connection errors, timeouts
        return SendResult([], [SendFailure(message, type(exc).__name__, str(exc), True, exc) for message in batch])
    sent = [batch[int(ok["Id"])] for ok in response.get("Successful", [])]
    failed = [
        SendFailure(
            batch[int(failure["Id"])],
            failure.get("Code", "Failed"),
            failure.get("Message", ""),
            retryable=not failure.get("SenderFault"),
        )
        for failure in response.get("Failed", [])
    ]
    return SendResult(sent, failed)


def send_with_retries(
    send: Callable[[list[Outgoing[T]]], SendResult[T]],
    messages: Sequence[Outgoing[T]],
    *,
    max_attempts: int,
    sleep: Callable[[float], None] = time.sleep,
) -> SendResult[T]:
    """Send messages in packed batches with ``send`` (one request per batch),
    then send the ones that failed for a retryable reason again, up to
    ``max_attempts`` tries in all, waiting a little longer before each.

    Returns every message sent, and every one not sent: those refused for
    good as they were refused, then those still failing after the last try.
    """
    result: SendResult[T] = SendResult()
    pending = list(messages)
    for attempt in range(1, max_attempts + 1):
        retry: list[SendFailure[T]] = []
        for batch in pack_batches(pending):
            sent = send(batch)
            result.sent.extend(sent.sent)
            for failure in sent.failed:
                (retry if failure.retryable else result.failed).append(failure)
        if not retry:
            break
        if attempt == max_attempts:
            result.failed.extend(retry)
            break
        pending = [failure.outgoing for failure in retry]
        sleep(min(2.0, 0.05 * 2**attempt))
    return result


# -- deleting and releasing ----------------------------------------------------------


@dataclass(frozen=True)
class Chunk(Generic[T]):
    """One batch request over up to ten items: those it did, those SQS refused
    (with its error text), or the exception that failed the request whole."""

    items: list[T]
    done: list[T] = field(default_factory=list)
    failed: list[tuple[T, str]] = field(default_factory=list)
    error: Exception | None = None


def delete_in_chunks(
    sqs: SQSClient,
    queue_url: str,
    items: Sequence[T],
    receipt_handle: Callable[[T], str],
    *,
    catching: tuple[type[Exception], ...] = (),
) -> Iterator[Chunk[T]]:
    """Delete received messages with DeleteMessageBatch, ten per request. Each
    request is made when its chunk is asked for; an exception of a ``catching``
    class is reported in the chunk, any other propagates."""
    return _in_chunks(
        sqs.delete_message_batch, queue_url, items, lambda item: {"ReceiptHandle": receipt_handle(item)}, catching
    )


def release_in_chunks(
    sqs: SQSClient,
    queue_url: str,
    items: Sequence[T],
    receipt_handle: Callable[[T], str],
    *,
    catching: tuple[type[Exception], ...] = (),
) -> Iterator[Chunk[T]]:
    """Make received messages visible again (ChangeMessageVisibilityBatch to 0),
    ten per request, as :func:`delete_in_chunks` deletes them."""
    return _in_chunks(
        sqs.change_message_visibility_batch,
        queue_url,
        items,
        lambda item: {"ReceiptHandle": receipt_handle(item), "VisibilityTimeout": 0},
        catching,
    )


def _in_chunks(
    call: Callable[..., Any],
    queue_url: str,
    items: Sequence[T],
    entry: Callable[[T], dict[str, Any]],
    catching: tuple[type[Exception], ...],
) -> Iterator[Chunk[T]]:
    for start in range(0, len(items), MAX_BATCH_ENTRIES):
        chunk = list(items[start : start + MAX_BATCH_ENTRIES])
        try:
            response = call(QueueUrl=queue_url, Entries=[{"Id": str(n), **entry(item)} for n, item in enumerate(chunk)])
        except catching as exc:
            yield Chunk(chunk, error=exc)
            continue
        yield Chunk(
            chunk,
            done=[chunk[int(ok["Id"])] for ok in response.get("Successful", [])],
            failed=[(chunk[int(f["Id"])], f.get("Message", "")) for f in response.get("Failed", [])],
        )
