"""The records of the jobs table: what they hold and how long they live.

- **root**: the newest rootJobTimestamp of a (type, domain, rootJobSignature);
- **duplicate claim**: who runs a dedup hash now, and when its last successful run started;
- **delivery claim**: a ``deliver_once`` job ID that is running or done;
- **failure**: one failed attempt: error class, message, traceback tail, and
  the dead-letter reason when that failure sent the job to the DLQ;
- **final attempt**: that a job's last allowed attempt started, and whether it
  succeeded, so the DLQ can tell a lost delete from a crash;
- **deferral**: how many attempts a job had used when the runner re-enqueued
  it as a new message (a deferral is not an attempt);
- **status**: what a ``track_status`` job is doing (:mod:`jobkit.status.tracker`);
- **cancellation**: that a ``cancellable`` job, or every job of a type and
  domain pushed before a time, must not run (:mod:`jobkit.records.cancellations`).

Keys carry their scope (:mod:`jobkit.records.keys`): type first, then the
domain, so reused job IDs and hashes never meet another type's or domain's
records. :class:`jobkit.records.store.Records` writes and reads every kind
over five item primitives (:mod:`jobkit.records.table`); a backend implements
only those: DynamoDB (:mod:`jobkit.records.dynamodb`) and memory
(:mod:`jobkit.records.memory`), held to one contract test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final, Literal

from jobkit.core.errors import JobKitError
from jobkit.records.keys import JobRef

DAY_S = 24 * 3600
ROOT_RECORD_TTL_S = 28 * DAY_S  # MediaWiki's JobQueue::ROOTJOB_TTL
DUPLICATE_RECORD_TTL_S = 7 * DAY_S  # longer than a job can wait in a queue (4 days' retention)
DELIVERY_RECORD_TTL_S = 7 * DAY_S
FAILURE_RECORD_TTL_S = 14 * DAY_S  # as long as the DLQ keeps the message
FINAL_RECORD_TTL_S = 14 * DAY_S
DEFERRAL_RECORD_TTL_S = 4 * DAY_S  # as long as the re-enqueued message can live
STATUS_RECORD_TTL_S = 14 * DAY_S
#: A cancellation lives as long as a job pushed before it can still be delivered:
#: the longest delay (a year and a day), then 4 days in the queue and 14 in the DLQ.
CANCEL_RECORD_TTL_S = (366 + 4 + 14) * DAY_S
#: A batch waits for members that may be delayed a year, retried for days and kept in a DLQ for 14 days.
BATCH_RECORD_TTL_S = CANCEL_RECORD_TTL_S


class _AnyDomain(Enum):
    ANY = "any"


#: Every domain's records (a domain filter: ``None`` means the jobs without a domain).
ANY_DOMAIN: Final = _AnyDomain.ANY
DomainFilter = str | None | Literal[_AnyDomain.ANY]


class TableUnavailable(JobKitError):
    """The jobs table could not be reached, was throttled, or refused the request."""


#: ``TableUnavailable``'s name in 0.2 (every kind of record raises it, not only
#: de-duplication's). Kept for the next release, and removed in the one after.
DedupUnavailable = TableUnavailable


@dataclass(frozen=True)
class Claim:
    """The result of a conditional claim: won, or what it lost to."""

    won: bool
    holder: str | None = None  # the owner token of a live claim
    lease_until: float | None = None  # when that live claim lapses
    last_success_start: float | None = None  # duplicate claims: start of the last successful run
    done: bool = False  # delivery claims: the job already ran to success (or was a duplicate)
    duplicate: bool = False  # delivery claims: done because it was skipped as a duplicate, not run


#: The error class of the failure record the deadline watchdog writes.
TIMED_OUT = "JobTimedOut"


@dataclass(frozen=True)
class FailureRecord:
    """One failed attempt of a job.

    Attributes:
        dead_letter_reason: set when this failure sent the job to the DLQ
            (``non_retryable``, ``attempts_exhausted``, ``poison``): the
            runner's own word, which the DLQ tools trust over message attributes.
        correlation_id: the correlation ID the job's message carried.
        ran: false for a receive that failed without running the job (the
            runner could not re-enqueue it): it is no attempt that ran.
    """

    job_id: str
    job_type: str
    domain: str | None
    attempt: int
    at: float
    error_class: str
    message: str
    traceback: str
    dead_letter_reason: str | None = None
    correlation_id: str | None = None
    ran: bool = True

    @property
    def ref(self) -> JobRef:
        return JobRef(self.job_type, self.domain, self.job_id)


@dataclass(frozen=True)
class FinalAttempt:
    """A job's last allowed attempt: which delivery made it, and whether it succeeded."""

    ref: JobRef
    attempt: int
    message_id: str
    started_at: float
    succeeded_at: float | None = None
    correlation_id: str | None = None  # the correlation ID the job's message carried


@dataclass(frozen=True)
class JobRuns:
    """What the jobs table knows of a job's attempts: its failures (newest
    first) and its final attempt, if it got that far."""

    failures: tuple[FailureRecord, ...] = ()
    final: FinalAttempt | None = None


class JobState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DEAD_LETTERED = "dead_lettered"  # failed for good: in the DLQ, its reason in ``note``
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"  # still running shortly before the Lambda deadline


@dataclass(frozen=True)
class JobStatus:
    """The status record of one job: its latest attempt.

    Attributes:
        progress: percent, 0 to 100, as the job last reported it (100 once it succeeded).
        result: the JSON text the job set with :meth:`jobkit.Job.set_result`.
        will_retry: for ``failed``: whether the message goes back to the queue.
        note: for ``skipped``: why.
        correlation_id: the correlation ID the job's message carried: the
            request (or job) that pushed it.
        enqueued_at: when the push this status is of was enqueued: a job ID
            pushed again is another job, whose first receive replaces it.
        cancelled_at, cancelled_by: a cancellation of the job was recorded
            (when, by whom), whatever the state says: a job that had started
            already ran on (``group.status`` fills these; the record does not hold them).
    """

    job_id: str
    job_type: str
    domain: str | None
    state: JobState
    attempt: int
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None
    progress: float | None = None
    result: str | None = None
    error: str | None = None
    will_retry: bool = False
    note: str | None = None
    correlation_id: str | None = None
    cancelled_at: float | None = None
    cancelled_by: str | None = None
    enqueued_at: float | None = None  # of the push whose attempt it is (a reused ID's earlier push is another)

    @property
    def ref(self) -> JobRef:
        return JobRef(self.job_type, self.domain, self.job_id)

    @property
    def final(self) -> bool:
        """Whether the job has ended: no copy of it will run again (but a redrive from the DLQ)."""
        if self.state is JobState.FAILED:  # (written so by a runner before dead_lettered existed)
            return not self.will_retry
        return self.state in (JobState.SUCCEEDED, JobState.SKIPPED, JobState.CANCELLED, JobState.DEAD_LETTERED)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data, with the result decoded."""
        return {
            "job_id": self.job_id,
            "type": self.job_type,
            "domain": self.domain,
            "state": str(self.state),
            "attempt": self.attempt,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "updated_at": self.updated_at,
            "progress": self.progress,
            "result": json.loads(self.result) if self.result is not None else None,
            "error": self.error,
            "will_retry": self.will_retry,
            "note": self.note,
            "correlation_id": self.correlation_id,
            "final": self.final,
            "cancelled_at": self.cancelled_at,
            "cancelled_by": self.cancelled_by,
            "enqueued_at": self.enqueued_at,
        }
