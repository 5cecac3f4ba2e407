"""What happened to one message: the runner's result, which metrics and
reports consume."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    """How the runner finished with a message on this delivery.

    Each outcome carries what the rest of jobkit needs to know of it, so that
    adding one is an edit of this class only: its EMF count metric, whether it
    ends the job, which column of a run's tally it falls in (in the order of
    the members), what a ``track_status`` job's status record says after it
    (``succeeded``, ``skipped``, ``failed``, ``dead_lettered``, ``cancelled``,
    or ``None``: it stays as it was), and another outcome's metric that also
    counts it.
    """

    metric: str
    is_final: bool  # the job is finished: no copy of it will be delivered again
    tally: str | None  # the column of a run's tally (the demo's table); None: not final
    status: str | None  # what the job's status record says after it; None: unchanged
    counted_in: str | None  # the metric of another outcome that also counts this one

    def __new__(
        cls,
        value: str,
        metric: str,
        is_final: bool,
        tally: str | None,
        status: str | None,
        counted_in: str | None = None,
    ) -> Outcome:
        member = str.__new__(cls, value)
        member._value_ = value
        member.metric = metric
        member.is_final = is_final
        member.tally = tally
        member.status = status
        member.counted_in = counted_in
        return member

    # ran, and succeeded
    SUCCEEDED = "succeeded", "Succeeded", True, "run", "succeeded"
    # skipped: a newer root job replaced this leaf
    SUPERSEDED = "superseded", "Superseded", True, "superseded", "skipped"
    # skipped: an identical job started later and succeeded
    DUPLICATE = "duplicate", "Duplicate", True, "duplicate", "skipped"
    # skipped: a deliver_once job that already ran (its status already says it succeeded)
    REDELIVERED = "redelivered", "Redelivered", True, "duplicate", None
    # skipped: a job with its debounce key pushed later owns the run
    DEBOUNCED = "debounced", "Debounced", True, "debounced", "skipped"
    # not run, or stopped when it saw it: a cancellation covers it (jobkit.records.cancellations)
    CANCELLED = "cancelled", "Cancelled", True, "cancelled", "cancelled"
    # ran, failed for the last time
    DEAD_LETTERED = "dead_lettered", "DeadLettered", True, "dead-lettered", "dead_lettered"
    # could not be parsed or resolved (no job to record a status of)
    POISONED = "poisoned", "Poisoned", True, "dead-lettered", None, "DeadLettered"
    # ran, failed, and will be retried (or could not be re-enqueued: see RecordResult.status)
    RETRIED = "retried", "Retried", False, None, "failed"
    # re-enqueued: an identical job is running right now
    DEFERRED = "deferred", "Deferred", False, None, None
    # re-enqueued: not yet released (a delay hop, a debounce wait)
    DELAYED = "delayed", "Delayed", False, None, None
    # re-enqueued: over its concurrency or rate limit
    LIMITED = "limited", "Limited", False, None, None, "Deferred"

    @property
    def metrics(self) -> tuple[str, ...]:
        """The EMF counts one result of this outcome adds to."""
        if self.counted_in is None:
            return (self.metric,)
        return (self.metric, self.counted_in)

    @classmethod
    def final_metrics(cls) -> tuple[str, ...]:
        """The counts that together tell every job that ended, each job once."""
        return tuple(o.metric for o in cls if o.is_final and o.counted_in is None)

    @classmethod
    def tallies(cls) -> tuple[str, ...]:
        """The columns of a run's tally, in order."""
        return tuple(dict.fromkeys(o.tally for o in cls if o.tally is not None))


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
    reason: str | None = None  # why it was skipped, re-enqueued or cancelled; the dead-letter reason
    dedup_unavailable: bool = False  # the dedup store failed and the job ran anyway (fail-open)
    send_back: str | None = None  # why its message goes back, though it ended: its end was not counted
    #: the batch of a member with no delivery whose body could be read (poisoned, or a large job's
    #: late copy): its end counts
    batch: str | None = None
    correlation_id: str | None = None  # the correlation ID its message carried
    priority: str | None = None  # the priority lane it came from (None: its queue's own)
    other_copy_runs: bool = False  # debounced by another delivery of this very job: not the job's end
    # What the job (or jobkit) raised, for tests and in-process callers; never serialised.
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def ran(self) -> bool:
        return self.run_time_ms is not None

    @property
    def failed(self) -> bool:
        """The attempt ran and failed."""
        return self.ran and self.outcome in (Outcome.RETRIED, Outcome.DEAD_LETTERED)

    @property
    def status(self) -> str | None:
        """What a ``track_status`` job's status record says after this result
        (``None``: unchanged). A retry with a reason is a re-enqueue that failed:
        the job did not run, so its status stays; nor does a copy of a job whose
        other copy owns the run."""
        if (self.outcome is Outcome.RETRIED and self.reason is not None) or self.other_copy_runs:
            return None
        return self.outcome.status

    @property
    def report_failure(self) -> bool:
        """Whether the message goes back to the queue (a batch item failure)."""
        return self.outcome is Outcome.RETRIED or self.send_back is not None


#: The outcomes that end a push itself, whichever copy of its message met them: it ran, or an
#: identical job did, or a newer root replaced it. Not a debounced copy (the run it waits for may
#: be another copy's of the same push), a cancelled one (a redrive may lift the cancellation of a
#: copy in the DLQ), nor a dead letter (see :mod:`jobkit.runner.stages.payload_done`).
PUSH_ENDS = frozenset({Outcome.SUCCEEDED, Outcome.DUPLICATE, Outcome.SUPERSEDED, Outcome.REDELIVERED})
