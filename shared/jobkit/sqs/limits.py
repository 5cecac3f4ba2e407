"""SQS's limits, and the sizes and delays that must fit in them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobkit.core.wire import NOT_SQS_TEXT

#: SQS limits (2025 onwards: messages and batches up to 1 MiB).
MAX_MESSAGE_BYTES = 1_048_576
MAX_ATTRIBUTES = 10  # message attributes per message
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


def message_size(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> int:
    """Bytes SQS counts against the 1 MiB limit: the body plus each attribute's
    name, data type and value."""
    size = len(body.encode("utf-8"))
    for name, attribute in attributes.items():
        value = attribute.get("StringValue") or attribute.get("BinaryValue") or b""
        value_bytes = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        size += len(name.encode("utf-8")) + len(attribute["DataType"].encode("utf-8")) + len(value_bytes)
    return size


def delay_seconds(remaining_s: float, *, minimum: int = 0, maximum: int = MAX_DELAY_S) -> int:
    """The ``DelaySeconds`` for a message that should wait ``remaining_s``:
    rounded up to whole seconds, at least ``minimum`` and at most ``maximum``
    (SQS's 900). A longer wait hops: whoever receives the message early sends
    it again with the time still left."""
    return max(minimum, min(maximum, int(-(-remaining_s // 1))))


def sqs_text(text: str) -> str:
    """``text`` as SQS takes it in a string attribute: each character it refuses
    (a NUL, an ANSI escape, U+FFFF) written as a visible escape (``\\x1b``), so an
    error from a C library or a subprocess never makes its DLQ copy fail."""
    if NOT_SQS_TEXT.search(text) is None:
        return text
    return NOT_SQS_TEXT.sub(_escape, text)


def _escape(found: Any) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
