"""What happened to one message: the runner's result, which metrics and
reports consume."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    """How the runner finished with a message on this delivery."""

    SUCCEEDED = "succeeded"  # ran, and succeeded
    RETRIED = "retried"  # ran, failed, and will be retried
    DEAD_LETTERED = "dead_lettered"  # ran, failed for the last time: now in the DLQ
    POISONED = "poisoned"  # could not be parsed or resolved: now in the DLQ
    DUPLICATE = "duplicate"  # skipped: an identical job started later and succeeded
    SUPERSEDED = "superseded"  # skipped: a newer root job replaced this leaf
    DEFERRED = "deferred"  # re-enqueued: an identical job is running right now
    DELAYED = "delayed"  # re-enqueued: not yet released (a delay hop)
    REDELIVERED = "redelivered"  # skipped: a deliver_once job that already ran

    @property
    def is_final(self) -> bool:
        """Whether the job is finished: no copy of it will be delivered again."""
        return self not in (Outcome.RETRIED, Outcome.DEFERRED, Outcome.DELAYED)


@dataclass(frozen=True)
class RecordResult:
    """The result of handling one SQS record."""

    message_id: str
    job_type: str  # "unknown" when a poison message names none
    outcome: Outcome
    job_id: str | None = None
    domain: str | None = None
    attempt: int = 1
    started_at: float | None = None  # when the job started running (epoch seconds)
    pickup_delay_ms: float | None = None  # set when the job ran
    root_job_age_ms: float | None = None  # set when a job with root params ran
    run_time_ms: float | None = None  # set when the job ran
    error: str | None = None  # "ErrorClass: message" when it failed or was poisoned
    dedup_unavailable: bool = False  # the dedup store failed and the job ran anyway (fail-open)

    @property
    def ran(self) -> bool:
        return self.run_time_ms is not None

    @property
    def failed(self) -> bool:
        """The attempt ran and failed."""
        return self.ran and self.outcome in (Outcome.RETRIED, Outcome.DEAD_LETTERED)

    @property
    def report_failure(self) -> bool:
        """Whether the message goes back to the queue (a batch item failure)."""
        return self.outcome is Outcome.RETRIED
