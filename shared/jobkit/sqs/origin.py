"""Where a push's jobs came from, as message attributes: the correlation ID
(``CorrelationId``), the OpenTelemetry ``traceparent``, and the X-Ray trace
header (the ``AWSTraceHeader`` system attribute)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from jobkit.core.correlation import current_correlation_id, current_traceparent, current_xray_header, new_correlation_id
from jobkit.sqs.attributes import CORRELATION_ATTRIBUTE, TRACEPARENT_ATTRIBUTE, string_attribute, xray_system_attribute
from jobkit.sqs.limits import message_size


@dataclass(frozen=True)
class Origin:
    """What a push stamps on each of its messages (the same for every job of a push)."""

    attributes: dict[str, Any]
    system: dict[str, Any]

    @cached_property
    def size(self) -> int:
        """The bytes its attributes add to each message."""
        return message_size("", self.attributes)

    @staticmethod
    def current() -> Origin:
        """The origin of a push made now: the request's or job's correlation ID
        (a new one outside both) and trace context."""
        attributes = {CORRELATION_ATTRIBUTE: string_attribute(current_correlation_id() or new_correlation_id())}
        traceparent = current_traceparent()
        if traceparent is not None:
            attributes[TRACEPARENT_ATTRIBUTE] = string_attribute(traceparent)
        return Origin(attributes, xray_system_attribute(current_xray_header()))
