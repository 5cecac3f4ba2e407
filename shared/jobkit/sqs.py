"""The SQS edge: queue URLs, message sizes, and the runner's queue operations.

Clients are injected. Nothing here creates a client or reads the environment
at import time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobkit.config import Declaration

log = logging.getLogger(__name__)

#: SQS limits (2025 onwards: messages and batches up to 1 MiB).
MAX_MESSAGE_BYTES = 1_048_576
MAX_BATCH_BYTES = 1_048_576
MAX_BATCH_ENTRIES = 10
MAX_DELAY_S = 900
MAX_VISIBILITY_S = 43_200

#: Room a job leaves in its message for what the runner adds when it
#: re-enqueues it (a deferral's marker attribute): a job of at most
#: :data:`MAX_JOB_BYTES` can always be deferred and hopped. Push refuses larger
#: jobs, and the runner treats a larger message from another producer as poison.
RUNNER_RESERVED_BYTES = 256
MAX_JOB_BYTES = MAX_MESSAGE_BYTES - RUNNER_RESERVED_BYTES

#: The attribute a deferred copy carries: the runner looks up, by the copy's
#: message ID, how many attempts its job had used. Anyone may set the
#: attribute; only the runner can write what it points to.
DEFERRED_ATTRIBUTE = "jobkit.deferred"

#: The attribute every copy the runner re-enqueues carries: the job's enqueue
#: time as the runner took it at the first delivery (see
#: :func:`jobkit.delivery.enqueued_at`), since the copy's own send time is later.
ENQUEUED_AT_ATTRIBUTE = "jobkit.enqueuedAt"

#: The message attribute every jobkit message carries, so ops tools can filter
#: by type without parsing bodies.
TYPE_ATTRIBUTE = "JobType"

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


def message_size(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> int:
    """Bytes SQS counts against the 1 MiB limit: the body plus each attribute's
    name, data type and value."""
    size = len(body.encode("utf-8"))
    for name, attribute in attributes.items():
        value = attribute.get("StringValue") or attribute.get("BinaryValue") or b""
        value_bytes = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        size += len(name.encode("utf-8")) + len(attribute["DataType"].encode("utf-8")) + len(value_bytes)
    return size


def string_attribute(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def number_attribute(value: float) -> dict[str, str]:
    return {"DataType": "Number", "StringValue": repr(value) if isinstance(value, float) else str(value)}


class QueueDirectory:
    """Resolves SQS queue names to URLs: from a given map (the deployed stack
    passes its URLs in the environment), else with one GetQueueUrl per queue
    per process, cached."""

    def __init__(self, sqs_client: Any, declaration: Declaration, urls: Mapping[str, str] | None = None) -> None:
        self._client = sqs_client
        self._declaration = declaration
        self._urls: dict[str, str] = dict(urls or {})
        self._lock = threading.Lock()
        self._declared_by_name = {declaration.queue_name(q): q for q in declaration.queues}

    def url(self, sqs_name: str) -> str:
        url = self._urls.get(sqs_name)
        if url is None:
            url = self._client.get_queue_url(QueueName=sqs_name)["QueueUrl"]
            with self._lock:
                self._urls[sqs_name] = url
        return url

    def sqs_name(self, queue: str) -> str:
        """The SQS name of a declared queue."""
        return self._declaration.queue_name(queue)

    def queue_url(self, job_type: str) -> str:
        """The URL of the queue that serves a declared job type."""
        return self.url(self._declaration.queue_name(self._declaration.job_type(job_type).queue))

    def dlq_url_for(self, sqs_name: str) -> str:
        """The DLQ URL of a jobkit queue, given the queue's SQS name."""
        declared = self._declared_by_name.get(sqs_name)
        if declared is None:
            raise KeyError(f"{sqs_name} is not a queue of this declaration")
        return self.url(self._declaration.dlq_name(declared))

    def declared_queue(self, sqs_name: str) -> str | None:
        return self._declared_by_name.get(sqs_name)


@dataclass(frozen=True)
class DeadLetterReason:
    """Why a message was dead-lettered by the runner (attached as message attributes)."""

    kind: str  # "poison", "non_retryable", "attempts_exhausted"
    error_class: str
    message: str
    attempts: int

    def attributes(self, source_queue: str, now: float) -> dict[str, dict[str, str]]:
        return {
            "jobkit.reason": string_attribute(self.kind),
            "jobkit.errorClass": string_attribute(self.error_class or "-"),
            "jobkit.error": string_attribute((self.message or "-")[:1024]),
            "jobkit.attempts": number_attribute(self.attempts),
            "jobkit.sourceQueue": string_attribute(source_queue),
            "jobkit.deadLetteredAt": number_attribute(round(now, 3)),
        }


class SqsQueues:
    """The queue operations a runner needs beyond what the event source
    mapping does for it: visibility backoff, dead-lettering, re-enqueueing.
    Bound to the runner's one queue (a declared queue name): every record it
    handles came from there."""

    def __init__(self, sqs_client: Any, directory: QueueDirectory, queue: str) -> None:
        self._client = sqs_client
        self._directory = directory
        self._queue = queue

    @property
    def _sqs_name(self) -> str:
        return self._directory.sqs_name(self._queue)

    @property
    def _url(self) -> str:
        return self._directory.url(self._sqs_name)

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        self._client.change_message_visibility(
            QueueUrl=self._url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=max(0, min(MAX_VISIBILITY_S, int(seconds))),
        )

    def dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, now: float) -> None:
        """Copy the message to its queue's DLQ with the reason attached, then
        delete the original. If the copy fails, it raises and the original is
        left alone. Once the copy is sent, the job is dead-lettered: a failed
        delete is left to the event source mapping, which deletes every record
        the handler does not report as failed (reporting it would only make a
        second DLQ copy)."""
        source = self._sqs_name
        body, attributes = dead_letter_copy(
            record["body"],
            reason.attributes(source, now),
            sendable_attributes(record.get("messageAttributes") or {}),
        )
        self._client.send_message(
            QueueUrl=self._directory.dlq_url_for(source), MessageBody=body, MessageAttributes=attributes
        )
        try:
            self.delete(record)
        except Exception:
            log.warning("dead-lettered %s, but could not delete the original: the poller will", record["messageId"])

    def delete(self, record: Mapping[str, Any]) -> None:
        self._client.delete_message(QueueUrl=self._url, ReceiptHandle=record["receiptHandle"])

    def requeue(
        self, record: Mapping[str, Any], delay_s: int, extra_attributes: Mapping[str, dict[str, str]] | None = None
    ) -> str:
        """Send a new copy of a message to its own queue (a delay hop or a
        deferral): the same body, the sender's own attributes (never a
        ``jobkit.*`` one it carried), and ``extra_attributes``. Returns the
        copy's message ID."""
        attributes = {**sendable_attributes(record.get("messageAttributes") or {}), **(extra_attributes or {})}
        response = self._client.send_message(
            QueueUrl=self._url,
            MessageBody=record["body"],
            DelaySeconds=max(0, min(MAX_DELAY_S, int(delay_s))),
            MessageAttributes=attributes,
        )
        return str(response["MessageId"])


def dead_letter_copy(
    body: str, reason: Mapping[str, dict[str, str]], kept: Mapping[str, dict[str, Any]]
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The body and attributes of a DLQ copy, within SQS's limits (1 MiB for the
    body and attributes together, 10 attributes).

    The reason comes first, then the error text (shortened to what fits), then
    the message's own attributes while they fit. A body that SQS delivered is
    at most 1 MiB with its own attributes, so a copy near the limit may lose
    some of them, never its body: the failure records keep the full error. Only
    a body over 1 MiB, which SQS cannot have delivered (a hand-made event), is
    cut so the copy can be sent at all, and the error says so.
    """
    error = reason.get("jobkit.error", {}).get("StringValue", "-")
    firsts = {name: value for name, value in reason.items() if name != "jobkit.error"}
    body_bytes = len(body.encode("utf-8", "surrogatepass"))
    room = MAX_MESSAGE_BYTES - message_size("", firsts)
    if body_bytes > room - 200:
        if body_bytes > MAX_MESSAGE_BYTES:  # cannot have come from SQS: keep what fits
            body = _utf8_prefix(body, room - 1224)
            error = f"{error[:900]} (the DLQ copy keeps the first {len(body)} characters of a {body_bytes}-byte body)"
            body_bytes = len(body.encode("utf-8", "surrogatepass"))
        else:
            firsts = _fitting(firsts, MAX_MESSAGE_BYTES - body_bytes)
    attributes: dict[str, dict[str, Any]] = dict(firsts)
    left = MAX_MESSAGE_BYTES - body_bytes - message_size("", attributes)
    error_room = left - len("jobkit.error") - len("String")
    if error_room > 0:
        attributes["jobkit.error"] = string_attribute(_utf8_prefix(error, min(error_room, 4096)) or "-")
    for name, value in list(kept.items())[: 10 - len(attributes)]:
        if message_size(body, {**attributes, name: value}) <= MAX_MESSAGE_BYTES:
            attributes[name] = value
    return body, attributes


def _fitting(attributes: Mapping[str, dict[str, str]], room: int) -> dict[str, dict[str, str]]:
    """The leading attributes that fit in ``room`` bytes."""
    kept: dict[str, dict[str, str]] = {}
    for name, value in attributes.items():
        if message_size("", {**kept, name: value}) > room:
            break
        kept[name] = value
    return kept


def _utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` that is at most ``max_bytes`` in UTF-8."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    return encoded[: max(0, max_bytes)].decode("utf-8", "ignore")


def sendable_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """A received message's attributes, ready to send again: without jobkit's
    dead-letter reason (``jobkit.*``), in SQS's API shape. Takes either shape:
    Lambda's event spells message attributes in camelCase, SQS's
    ReceiveMessage in PascalCase."""
    converted: dict[str, dict[str, Any]] = {}
    for name, attribute in attributes.items():
        if name.startswith("jobkit."):
            continue  # a redriven message's old reason must not stick to it
        data_type = attribute.get("dataType") or attribute.get("DataType") or "String"
        entry: dict[str, Any] = {"DataType": data_type}
        if data_type.startswith("Binary"):
            entry["BinaryValue"] = attribute.get("binaryValue") or attribute.get("BinaryValue")
        else:
            entry["StringValue"] = attribute.get("stringValue") or attribute.get("StringValue")
        converted[name] = entry
    return converted
