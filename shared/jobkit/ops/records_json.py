"""A job's failure records and final-attempt record as JSON, as ``jobkit dlq
show`` and ``jobkit job`` print them: text made printable, and a correlation
ID only if it is a valid one."""

from __future__ import annotations

from typing import Any

from jobkit.core.correlation import valid_correlation_id
from jobkit.ops.bodies import safe_text
from jobkit.records import FailureRecord, FinalAttempt


def failure_to_json(record: FailureRecord) -> dict[str, Any]:
    return {
        "attempt": record.attempt,
        "at": record.at,
        "error_class": safe_text(record.error_class),
        "message": safe_text(record.message),
        "traceback": safe_text(record.traceback),
        "dead_letter_reason": record.dead_letter_reason,
        "correlation_id": valid_correlation_id(record.correlation_id),
    }


def final_to_json(record: FinalAttempt | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "attempt": record.attempt,
        "message_id": record.message_id,
        "started_at": record.started_at,
        "succeeded_at": record.succeeded_at,
        "correlation_id": valid_correlation_id(record.correlation_id),
    }
