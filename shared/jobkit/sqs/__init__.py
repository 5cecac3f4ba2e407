"""The SQS edge: limits and attributes, batch requests, receiving, queue URLs,
and the SQS side of the runner's and the push SDK's ports.

Clients are injected. Nothing here creates a client or reads the environment
at import time, and nothing imports botocore until a request is made.
"""

from __future__ import annotations

from jobkit.sqs.attributes import (
    CORRELATION_ATTRIBUTE,
    DEBOUNCE_ATTRIBUTE,
    DEFERRED_ATTRIBUTE,
    HELD_ATTRIBUTE,
    ORIGINAL_MESSAGE_ATTRIBUTE,
    TRACEPARENT_ATTRIBUTE,
    TYPE_ATTRIBUTE,
    XRAY_SYSTEM_ATTRIBUTE,
    DeadLetterReason,
    by_priority,
    dead_letter_copy,
    number_attribute,
    sendable_attributes,
    string_attribute,
    system_attributes,
    xray_system_attribute,
)
from jobkit.sqs.batches import (
    RETRYABLE_CODES,
    Chunk,
    Outgoing,
    SendFailure,
    SendResult,
    delete_in_chunks,
    is_retryable,
    pack_batches,
    release_in_chunks,
    send_batch,
    send_with_retries,
)
from jobkit.sqs.first_seen import ENQUEUED_AT_ATTRIBUTE, enqueued_at, first_seen_at, pushed_at
from jobkit.sqs.limits import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ENTRIES,
    MAX_DELAY_S,
    MAX_JOB_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_VISIBILITY_S,
    RUNNER_RESERVED_BYTES,
    delay_seconds,
    message_size,
)
from jobkit.sqs.queues import QueueDirectory, SqsQueues
from jobkit.sqs.receive import new_messages, receive_messages
from jobkit.sqs.transport import SqsPushTransport

__all__ = [
    "CORRELATION_ATTRIBUTE",
    "DEBOUNCE_ATTRIBUTE",
    "DEFERRED_ATTRIBUTE",
    "ENQUEUED_AT_ATTRIBUTE",
    "HELD_ATTRIBUTE",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ENTRIES",
    "MAX_DELAY_S",
    "MAX_JOB_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_VISIBILITY_S",
    "ORIGINAL_MESSAGE_ATTRIBUTE",
    "RETRYABLE_CODES",
    "RUNNER_RESERVED_BYTES",
    "TRACEPARENT_ATTRIBUTE",
    "TYPE_ATTRIBUTE",
    "XRAY_SYSTEM_ATTRIBUTE",
    "Chunk",
    "DeadLetterReason",
    "Outgoing",
    "QueueDirectory",
    "SendFailure",
    "SendResult",
    "SqsPushTransport",
    "SqsQueues",
    "by_priority",
    "dead_letter_copy",
    "delay_seconds",
    "delete_in_chunks",
    "enqueued_at",
    "first_seen_at",
    "is_retryable",
    "message_size",
    "new_messages",
    "number_attribute",
    "pack_batches",
    "pushed_at",
    "receive_messages",
    "release_in_chunks",
    "send_batch",
    "send_with_retries",
    "sendable_attributes",
    "string_attribute",
    "system_attributes",
    "xray_system_attribute",
]
