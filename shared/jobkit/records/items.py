"""Reading the jobs table's items back as records: what :class:`jobkit.records.store.Records`
returns. An attribute of the wrong type reads as absent, never as an error: the
table is written by jobkit only, but an operator may have edited an item."""

from __future__ import annotations

from jobkit.records import Claim, FailureRecord, FinalAttempt, JobState, JobStatus
from jobkit.records.keys import JobRef
from jobkit.records.table import Item


def lost_claim(item: Item) -> Claim:
    return Claim(
        False,
        holder=optional_text(item, "owner"),
        lease_until=number(item, "lease_until"),
        last_success_start=number(item, "last_success_start"),
        done=item.get("state") == "done",
        duplicate=item.get("ended") == "duplicate",
    )


def final_attempt(item: Item, ref: JobRef) -> FinalAttempt:
    return FinalAttempt(
        ref,
        attempt=integer(item, "attempt") or 0,
        message_id=text(item, "message_id"),
        started_at=number(item, "started_at") or 0.0,
        succeeded_at=number(item, "succeeded_at"),
        correlation_id=optional_text(item, "correlation_id"),
    )


def status(ref: JobRef, item: Item) -> JobStatus:
    return JobStatus(
        job_id=ref.job_id,
        job_type=ref.job_type,
        domain=ref.domain,
        state=JobState(text(item, "state")),
        attempt=integer(item, "attempt") or 0,
        updated_at=number(item, "updated_at") or 0.0,
        started_at=number(item, "started_at"),
        finished_at=number(item, "finished_at"),
        progress=number(item, "progress"),
        result=optional_text(item, "result"),
        error=optional_text(item, "error"),
        will_retry=item.get("will_retry") is True,
        note=optional_text(item, "note"),
        correlation_id=optional_text(item, "correlation_id"),
        enqueued_at=number(item, "enqueued_at"),
    )


def failure(item: Item, ref: JobRef) -> FailureRecord:
    return FailureRecord(
        job_id=ref.job_id,
        job_type=ref.job_type,
        domain=ref.domain,
        attempt=integer(item, "attempt") or 0,
        at=number(item, "at") or 0.0,
        error_class=text(item, "error_class"),
        message=text(item, "message"),
        traceback=text(item, "traceback"),
        dead_letter_reason=optional_text(item, "dead_letter_reason"),
        correlation_id=optional_text(item, "correlation_id"),
        ran=item.get("not_run") is not True,
    )


def number(item: Item, name: str) -> float | None:
    value = item.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def integer(item: Item, name: str) -> int | None:
    value = number(item, name)
    return None if value is None else int(value)


def optional_text(item: Item, name: str) -> str | None:
    value = item.get(name)
    return value if isinstance(value, str) else None


def text(item: Item, name: str) -> str:
    return optional_text(item, name) or ""
