"""One delivery of a job to the runner, and the ports the runner acts through.

A :class:`Delivery` is a parsed record: the SQS record, the spec, the declared
type, and which attempt this is; the runner's stages add what they learn. The ports are what the runner needs from SQS
(:class:`jobkit.sqs.SqsQueues`), from CloudWatch (:class:`jobkit.core.metrics.EmfMetrics`)
and from Lambda (its context object); the runner never imports boto3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from jobkit.core.correlation import correlation_of
from jobkit.core.errors import SpecError
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import JobType
from jobkit.records.keys import JobRef, Push
from jobkit.sqs import (
    CORRELATION_ATTRIBUTE,
    MAX_JOB_BYTES,
    DeadLetterReason,
    message_size,
    sendable_attributes,
)
from jobkit.status.tracker import NO_STATUS, StatusTracker

if TYPE_CHECKING:
    from jobkit.jobs.job import Job
    from jobkit.payloads.reference import ParamsRef
    from jobkit.sqs.attributes import AttributeValue
    from jobkit.status.cancel import CancelWatch


class QueuePort(Protocol):
    """The queue operations the runner performs itself (see :class:`jobkit.sqs.SqsQueues`)."""

    def priority(self, record: Mapping[str, Any]) -> str | None:
        """The priority lane the record came from (None: its queue's default lane)."""
        ...

    def change_visibility(self, record: Mapping[str, Any], seconds: int) -> None: ...

    def dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, now: float) -> None: ...

    def requeue(
        self, record: Mapping[str, Any], delay_s: int, extra_attributes: Mapping[str, AttributeValue] | None = None
    ) -> str: ...


class MetricsPort(Protocol):
    def record(self, result: RecordResult) -> None: ...

    def flush(self) -> None: ...


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(eq=False)
class Delivery:
    """One delivery of a parsed job: the record, the spec and what we know of it.

    Attributes:
        job_class: the class the declaration names for the type.
        attempt: which attempt this is (a stage may correct it).
        context: the Lambda context of the invocation, if any.
        status: the job's status tracker (the status stage attaches one).
        job: the job instance, once the stage that builds it has.
        dedup_unavailable: the records store failed this delivery, and the job ran
            anyway (fail-open); a stage that learns it after the result was
            made (a settle in the background) sets it by the end of the batch.
        seen_at: when SQS saw the job's first message (:func:`jobkit.sqs.first_seen_at`);
            every copy the runner sends carries it.
        pushed_at: the job's ordering time (:func:`jobkit.sqs.pushed_at`): what
            debounce orders jobs by, whatever copy of the job this is.
        stamped_at: the ``enqueuedAt`` its producer stamped in the body (``spec``
            holds the duplicate horizon instead): what names the push for
            cancellations, whatever copy of it this is, however it was sent.
        owes_run: it took its debounce window's run, so jobs it debounced count
            on it: a root recorded since must not skip it (it runs anyway).
        debounce_registration: the message that registered the job in its
            debounce window; every copy the runner sends of it carries this.
        recounted: the runner recounted the job's attempts once
            (:mod:`jobkit.runner.stages.recount`); every copy it sends keeps that.
        cancel_watch: what the job's ``self.cancelled()`` asks, for a
            ``cancellable`` type (:mod:`jobkit.runner.stages.cancel`).
        send_back: why the message goes back though the job ended, set by the
            end of the batch: its batch could not count its end
            (:mod:`jobkit.runner.stages.batch`).
    """

    record: Mapping[str, Any]
    spec: JobSpecification
    job_type: JobType
    job_class: type[Job]
    attempt: int
    receive_count: int
    context: LambdaContext | None = None
    status: StatusTracker = field(default=NO_STATUS)
    job: Job | None = None
    dedup_unavailable: bool = False
    send_back: str | None = None
    seen_at: float | None = None
    pushed_at: float | None = None
    stamped_at: float | None = None
    owes_run: bool = False
    debounce_registration: str | None = None
    recounted: bool = False
    cancel_watch: CancelWatch | None = None
    params_ref: ParamsRef | None = None  # its params came from the payload bucket (jobkit.payloads)
    _notes: dict[object, Any] = field(default_factory=dict, repr=False)

    def note(self, owner: object, value: Any) -> None:
        """Keep what a stage (``owner``) learned about this delivery."""
        self._notes[owner] = value

    def noted(self, owner: object) -> Any:
        """What ``owner`` noted about this delivery, or None."""
        return self._notes.get(owner)

    def remaining_s(self, default: float) -> float:
        """Seconds left before the Lambda's deadline (``default`` outside Lambda)."""
        return self.context.get_remaining_time_in_millis() / 1000 if self.context is not None else default

    @property
    def push(self) -> Push:
        """The push this is a copy of, as cancellations name it."""
        return Push(self.spec.type, self.spec.domain, self.spec.id, self.stamped_at)

    @property
    def ref(self) -> JobRef:
        return JobRef(self.spec.type, self.spec.domain, self.spec.id)

    @property
    def message_id(self) -> str:
        return str(self.record["messageId"])

    @property
    def prior_attempts(self) -> int:
        """Attempts made by the messages this one was re-enqueued from."""
        return self.attempt - self.receive_count

    @cached_property
    def correlation_id(self) -> str | None:
        """The correlation ID its producer sent (``CorrelationId``), if a valid
        one; else the job's own ID, so that a job sent without one (a schedule's
        firing, another language's producer) and the jobs it pushes share one."""
        return correlation_of(string_attribute_of(self.record, CORRELATION_ATTRIBUTE), self.spec.id)

    @property
    def keys(self) -> dict[str, Any]:
        """Structured log keys. Never the params: those are logged at DEBUG only."""
        keys = {"job_id": self.spec.id, "job_type": self.spec.type, "domain": self.spec.domain}
        if self.spec.priority is not None:  # a priority lane's job: which lane
            keys["priority"] = self.spec.priority
        correlation_id = self.correlation_id
        if correlation_id is not None:
            keys["correlation_id"] = correlation_id
        return keys

    def result(self, outcome: Outcome, **fields: Any) -> RecordResult:
        return RecordResult(
            message_id=self.record["messageId"],
            job_type=self.spec.type,
            outcome=outcome,
            job_id=self.spec.id,
            domain=self.spec.domain,
            attempt=self.attempt,
            correlation_id=self.correlation_id,
            priority=self.spec.priority,
            **fields,
        )


def receive_count(record: Any) -> int:
    """The record's ApproximateReceiveCount; 1 for a record that does not say
    (a hand-made event may hold anything)."""
    # (type() is dict first: a Lambda event is made of dicts, and an ABC check costs ten times as much)
    attributes = record.get("attributes") if type(record) is dict or isinstance(record, Mapping) else None
    value = (
        attributes.get("ApproximateReceiveCount", "1")
        if type(attributes) is dict or isinstance(attributes, Mapping)
        else "1"
    )
    try:
        return max(1, int(value))
    except (TypeError, ValueError, OverflowError):
        return 1


def message_id_of(record: Any) -> str:
    """The record's message ID, as text, whatever a hand-made event put there."""
    value = record.get("messageId") if isinstance(record, Mapping) else None
    return value if isinstance(value, str) else "?"


def check_size(record: Mapping[str, Any]) -> None:
    """A job is at most :data:`~jobkit.sqs.MAX_JOB_BYTES` with its attributes, so
    that the runner can always re-enqueue it; a bigger message came from another
    producer (or a hand-made event) and is poison, not a job to run."""
    body = record["body"]
    if not isinstance(body, str):
        raise SpecError(f"message body must be text, got {type(body).__name__}")
    attributes = record.get("messageAttributes") or {}
    rough = len(body) + sum(
        len(name) + 32 + len(str(a.get("stringValue") or "")) + len(str(a.get("binaryValue") or ""))
        for name, a in attributes.items()
    )
    if 4 * rough <= MAX_JOB_BYTES:
        return
    text = body.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    size = message_size(text, sendable_attributes(attributes))
    if size > MAX_JOB_BYTES:
        raise SpecError(
            f"message is {size} bytes with its attributes, over the {MAX_JOB_BYTES} a job may have"
            " (the SQS limit less the room the runner needs to re-enqueue it)"
        )


def string_attribute_of(record: Mapping[str, Any], name: str) -> str | None:
    """A message attribute's string value, as Lambda's event spells it."""
    attributes = record.get("messageAttributes")
    attribute = attributes.get(name) if type(attributes) is dict or isinstance(attributes, Mapping) else None
    value = attribute.get("stringValue") if type(attribute) is dict or isinstance(attribute, Mapping) else None
    return value if isinstance(value, str) else None
