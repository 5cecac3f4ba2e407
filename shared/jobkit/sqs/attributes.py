"""Message attributes: the names jobkit gives them, how to build them, and
what a dead letter's copy carries within SQS's limits."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.sqs.first_seen import ENQUEUED_AT_ATTRIBUTE, first_seen_at
from jobkit.sqs.limits import MAX_ATTRIBUTES, MAX_MESSAGE_BYTES, message_size, sqs_text

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

    AttributeValue = MessageAttributeValueTypeDef

#: The attribute a deferred copy carries: the runner looks up, by the copy's
#: message ID, how many attempts its job had used. Anyone may set the
#: attribute; only the runner can write what it points to.
DEFERRED_ATTRIBUTE = "jobkit.deferred"


#: The attribute of a copy the runner sent again after registering it with
#: its debounce key: on its return it claims the run rather than registering.
#: A sender that sets it gains nothing: a job is debounced only by a record
#: of a job enqueued after it.
DEBOUNCE_ATTRIBUTE = "jobkit.debounce"

#: The attribute of a copy that a concurrency or rate limit held back: how
#: many times, and since when ("3 1732272000.5"), for the backoff and for
#: ``max_held_s``. A sender that sets it can only make its own job wait longer.
HELD_ATTRIBUTE = "jobkit.held"

#: The message attribute every jobkit message carries, so ops tools can filter
#: by type without parsing bodies.
#: On a runner's DLQ copy of an unreadable message: the message ID of the
#: message it copies (the copy has an ID of its own; the runner's logs name the
#: original's). A job's copy is found by its job ID.
ORIGINAL_MESSAGE_ATTRIBUTE = "jobkit.messageId"
TYPE_ATTRIBUTE = "JobType"

#: The correlation ID of the request or job that pushed the job (see
#: :mod:`jobkit.core.correlation`). The sender's, not the runner's: copies keep it.
CORRELATION_ATTRIBUTE = "CorrelationId"

#: The producer's W3C trace context, when an OpenTelemetry span was active.
TRACEPARENT_ATTRIBUTE = "traceparent"

#: SQS's one message *system* attribute: the producer's X-Ray trace header. It
#: is not one of the 10 message attributes, and SQS does not count its size.
XRAY_SYSTEM_ATTRIBUTE = "AWSTraceHeader"

#: The sender's attributes a copy keeps first when SQS's 10 do not hold them all.
_FIRST = (TYPE_ATTRIBUTE, CORRELATION_ATTRIBUTE, TRACEPARENT_ATTRIBUTE)


def by_priority(attributes: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    """A sender's attributes, the type, correlation ID and trace context first."""
    first = sorted(attributes, key=lambda name: _FIRST.index(name) if name in _FIRST else len(_FIRST))
    return {name: attributes[name] for name in first}


def system_attributes(record: Mapping[str, Any]) -> dict[str, Any]:
    """A received record's X-Ray trace header, as a copy's ``MessageSystemAttributes``
    (Lambda's event carries it in the record's ``attributes``; ReceiveMessage too)."""
    attributes = record.get("attributes") or record.get("Attributes") or {}
    header = attributes.get(XRAY_SYSTEM_ATTRIBUTE) if isinstance(attributes, Mapping) else None
    return xray_system_attribute(header) if isinstance(header, str) else {}


def xray_system_attribute(header: str | None) -> dict[str, Any]:
    """``MessageSystemAttributes`` carrying an X-Ray trace header, or none."""
    if not header:
        return {}
    return {XRAY_SYSTEM_ATTRIBUTE: {"DataType": "String", "StringValue": header}}


def string_attribute(value: str) -> AttributeValue:
    return {"DataType": "String", "StringValue": value}


def number_attribute(value: float) -> AttributeValue:
    return {"DataType": "Number", "StringValue": repr(value) if isinstance(value, float) else str(value)}


def first_seen_attribute(message: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """The attribute a copy of a received message carries: when SQS saw the
    job's first message (:mod:`jobkit.sqs.first_seen`); none if it cannot say."""
    seen = first_seen_at(message)
    return {} if seen is None else {ENQUEUED_AT_ATTRIBUTE: number_attribute(seen)}


def copy_attributes(body: str, message: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """What a copy of a received message is sent with, outside the runner (a
    redrive): the sender's own attributes, the type, correlation ID and trace
    context first, and when SQS first saw the job, in that place if it fits
    SQS's 10 attributes and 1 MiB (a message of a foreign producer at the limit
    goes back as it came, and is then ordered from its body's time)."""
    own = by_priority(sendable_attributes(message.get("MessageAttributes") or message.get("messageAttributes") or {}))
    seen = first_seen_attribute(message)
    if not seen or len(own) >= MAX_ATTRIBUTES or message_size(body, {**own, **seen}) > MAX_MESSAGE_BYTES:
        return own
    return {**own, **seen}


def sendable_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, AttributeValue]:
    """A received message's attributes, ready to send again: without jobkit's
    dead-letter reason (``jobkit.*``), in SQS's API shape. Takes either shape:
    Lambda's event spells message attributes in camelCase, SQS's
    ReceiveMessage in PascalCase."""
    converted: dict[str, AttributeValue] = {}
    for name, attribute in attributes.items():
        if name.startswith("jobkit."):
            continue  # a redriven message's old reason must not stick to it
        data_type = attribute.get("dataType") or attribute.get("DataType") or "String"
        entry: AttributeValue = {"DataType": data_type}
        if data_type.startswith("Binary"):
            entry["BinaryValue"] = binary_value(attribute)
        else:
            entry["StringValue"] = attribute.get("stringValue") or attribute.get("StringValue") or ""
        converted[name] = entry
    return converted


def binary_value(attribute: Mapping[str, Any]) -> bytes:
    """A binary attribute's bytes: Lambda's event spells them as base64 text
    (``binaryValue``), ReceiveMessage through boto3 as bytes (``BinaryValue``)."""
    value = attribute.get("BinaryValue")
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    text = attribute.get("binaryValue") or value
    if isinstance(text, bytes | bytearray):
        return bytes(text)
    if not isinstance(text, str):
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # not base64: a hand-made event; keep its text
        return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class DeadLetterReason:
    """Why a message was dead-lettered by the runner (attached as message attributes)."""

    kind: str  # "poison", "non_retryable", "attempts_exhausted", "held_too_long", "internal_error"
    error_class: str
    message: str
    attempts: int

    def attributes(self, source_queue: str, now: float) -> dict[str, AttributeValue]:
        return {
            "jobkit.reason": string_attribute(self.kind),
            "jobkit.errorClass": string_attribute(sqs_text(self.error_class or "-")),
            "jobkit.error": string_attribute(sqs_text((self.message or "-")[:1024])),
            "jobkit.attempts": number_attribute(self.attempts),
            "jobkit.sourceQueue": string_attribute(source_queue),
            "jobkit.deadLetteredAt": number_attribute(round(now, 3)),
        }


def dead_letter_copy(
    body: str, reason: Mapping[str, AttributeValue], kept: Mapping[str, AttributeValue]
) -> tuple[str, dict[str, AttributeValue]]:
    """The body and attributes of a DLQ copy, within SQS's limits (1 MiB for the
    body and attributes together, 10 attributes).

    The reason comes first, then the error text (shortened to what fits), then
    the message's own attributes while they fit. A body that SQS delivered is
    at most 1 MiB with its own attributes, so a copy near the limit may lose
    some of them, never its body: the failure records keep the full error. Only
    a body over 1 MiB, which SQS cannot have delivered (a hand-made event), is
    cut so the copy can be sent at all, and the error says so.
    """
    error = reason["jobkit.error"].get("StringValue", "-") if "jobkit.error" in reason else "-"
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
    attributes: dict[str, AttributeValue] = dict(firsts)
    left = MAX_MESSAGE_BYTES - body_bytes - message_size("", attributes)
    error_room = left - len("jobkit.error") - len("String")
    if error_room > 0:
        attributes["jobkit.error"] = string_attribute(_utf8_prefix(error, min(error_room, 4096)) or "-")
    for name, value in list(kept.items())[: MAX_ATTRIBUTES - len(attributes)]:
        if message_size(body, {**attributes, name: value}) <= MAX_MESSAGE_BYTES:
            attributes[name] = value
    return body, attributes


def _fitting(attributes: Mapping[str, AttributeValue], room: int) -> dict[str, AttributeValue]:
    """The leading attributes that fit in ``room`` bytes."""
    kept: dict[str, AttributeValue] = {}
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
