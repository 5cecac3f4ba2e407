"""The runner: turns an SQS event into job runs and reports partial batch failures.

One :class:`Runner` serves one queue in one Lambda container. Per record it

1. parses the spec, checks that its queue serves the type, and resolves the
   class from the declaration; a message that fails any of this is *poison*:
   it goes to the DLQ with the reason, alone;
2. re-enqueues a job whose release time is still ahead (a delay hop, not an attempt);
3. asks the dedup store whether the job runs: it may be superseded by a newer
   root job, a duplicate of a later successful run, a redelivery of a job that
   already ran, or deferred while its twin runs;
4. runs the job under a deadline watchdog, then ``tear_down(succeeded)``, and
   settles its claims; a job's final attempt leaves a small record;
5. on failure, writes a failure record, then hides the message for an
   exponential backoff and reports it as a batch item failure, or dead-letters
   it with the reason when it may not retry or has used its last attempt.

Nothing here can crash a batch: every record ends with a result. This module
talks to AWS only through injected ports and never imports boto3.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from jobkit.backoff import retry_delay_s
from jobkit.clock import Clock, SystemClock
from jobkit.config import Declaration, JobType
from jobkit.dedup import Admission, Candidate, DedupStore, Verdict
from jobkit.error_text import describe, error_message, traceback_tail
from jobkit.errors import JobClassError, JobFailed, NonRetryableError, SpecError, UnknownJobType
from jobkit.job import Job, JobContext
from jobkit.outcome import Outcome, RecordResult
from jobkit.record_keys import JobRef
from jobkit.records import FailureRecord, FinalAttempt, JobRuns
from jobkit.registry import JobRegistry
from jobkit.spec import JobSpecification
from jobkit.sqs import (
    DEFERRED_ATTRIBUTE,
    MAX_DELAY_S,
    MAX_JOB_BYTES,
    TYPE_ATTRIBUTE,
    DeadLetterReason,
    message_size,
    sendable_attributes,
    string_attribute,
)
from jobkit.status import NO_STATUS, RecordingStatusTracker, StatusTracker
from jobkit.watchdog import TIMED_OUT, DeadlineWatchdog

if TYPE_CHECKING:
    from jobkit.clock import Alarm
    from jobkit.push import JobQueueGroup

log = logging.getLogger(__name__)

UNKNOWN_TYPE = "unknown"
_SKIPPED = {
    Verdict.SUPERSEDED: Outcome.SUPERSEDED,
    Verdict.DUPLICATE: Outcome.DUPLICATE,
    Verdict.REDELIVERED: Outcome.REDELIVERED,
}


class QueuePort(Protocol):
    """The queue operations the runner performs itself (see :class:`jobkit.sqs.SqsQueues`)."""

    def change_visibility(self, receipt_handle: str, seconds: int) -> None: ...

    def dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, now: float) -> None: ...

    def requeue(
        self, record: Mapping[str, Any], delay_s: int, extra_attributes: Mapping[str, dict[str, str]] | None = None
    ) -> str: ...


class MetricsPort(Protocol):
    def record(self, result: RecordResult) -> None: ...

    def flush(self) -> None: ...


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(frozen=True)
class _Delivery:
    """One delivery of a parsed job: the record, the spec and what we know of it."""

    record: Mapping[str, Any]
    spec: JobSpecification
    job_type: JobType
    attempt: int
    receive_count: int
    status: StatusTracker = field(default=NO_STATUS)

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

    @property
    def keys(self) -> dict[str, Any]:
        """Structured log keys. Never the params: those are logged at DEBUG only."""
        return {"job_id": self.spec.id, "job_type": self.spec.type, "domain": self.spec.domain}

    def result(self, outcome: Outcome, **fields: Any) -> RecordResult:
        return RecordResult(
            message_id=self.record["messageId"],
            job_type=self.spec.type,
            outcome=outcome,
            job_id=self.spec.id,
            domain=self.spec.domain,
            attempt=self.attempt,
            **fields,
        )


class Runner:
    """Runs the jobs of SQS batches from one queue.

    Args:
        declaration: the job types this runner knows: its queue's, and those its jobs push.
        queue: the declared queue it serves; a message of any other type is poison.
        queues: SQS operations (backoff, dead-lettering, re-enqueueing).
        dedup: the dedup store; without one, jobs run without de-duplication
            and no records are written.
        group_factory: makes the push SDK that jobs use to push more jobs, per domain.
        metrics: receives one :class:`RecordResult` per record; flushed per batch.
        clock: the time source (tests and the local stack move it).
        rng: randomness for backoff jitter.
    """

    def __init__(
        self,
        declaration: Declaration,
        *,
        queue: str,
        queues: QueuePort,
        dedup: DedupStore | None = None,
        group_factory: Callable[[str | None], JobQueueGroup] | None = None,
        metrics: MetricsPort | None = None,
        clock: Clock | None = None,
        registry: JobRegistry | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.declaration = declaration
        self.queue = declaration.queues[queue]
        self._queues = queues
        self._dedup = dedup
        self._group_factory = group_factory
        self._metrics = metrics
        self._clock = clock or SystemClock()
        self._registry = registry or JobRegistry(declaration)
        self._rng = rng or random.Random()
        self._watchdog = DeadlineWatchdog(self._clock, dedup.record_failure if dedup else lambda _: None)

    def handle(self, event: Mapping[str, Any], context: LambdaContext | None = None) -> dict[str, Any]:
        """The Lambda handler body: returns ``{"batchItemFailures": [...]}``."""
        results = self.process(event, context)
        return {"batchItemFailures": [{"itemIdentifier": r.message_id} for r in results if r.report_failure]}

    def process(self, event: Mapping[str, Any], context: LambdaContext | None = None) -> list[RecordResult]:
        """Handle every record of an SQS event and return what happened to each."""
        results = [self._handle_safely(record, context) for record in event.get("Records", [])]
        if self._metrics is not None:
            try:
                for result in results:
                    self._metrics.record(result)
                self._metrics.flush()
            except Exception:  # metrics never fail a job
                log.warning("could not emit metrics", exc_info=True)
        return results

    # -- one record ------------------------------------------------------------------

    def _handle_safely(self, record: Mapping[str, Any], context: LambdaContext | None) -> RecordResult:
        try:
            return self._handle(record, context)
        except Exception as exc:  # a bug in jobkit itself: never crash the batch
            log.exception("internal error handling message %s", record.get("messageId"))
            return self._internal_error(record, exc)

    def _handle(self, record: Mapping[str, Any], context: LambdaContext | None) -> RecordResult:
        receive_count = _receive_count(record)
        try:
            _check_size(record)
            spec = JobSpecification.from_message(record["body"])
            spec.check_times(self._clock.now())
            job_type = self._served_type(spec.type)
        except SpecError as exc:
            return self._poison(record, exc, receive_count)
        try:
            job_class = self._registry.resolve(spec.type)
        except JobClassError as exc:
            return self._poison(record, exc, receive_count, spec)
        attempt = self._attempts_before(record, spec) + receive_count
        delivery = _Delivery(record, spec, job_type, attempt, receive_count)
        if spec.release_at is not None and spec.release_at > self._clock.now():
            return self._hop(delivery, spec.release_at - self._clock.now())
        if attempt > job_type.max_attempts:
            settled = self._past_last_attempt(delivery)
            if settled is not None:
                return settled
            delivery = replace(delivery, attempt=job_type.max_attempts)
        delivery = replace(delivery, status=self._status_tracker(spec, job_type, delivery.attempt))
        try:
            job = job_class(spec, self._job_context(delivery, context))
        except Exception as exc:  # the job's own constructor failed: a failed attempt
            return self._fail(delivery, exc, None, permanent=isinstance(exc, NonRetryableError), fields={})
        try:
            admission = self._admit(job, delivery, context)
        except SpecError as exc:  # params that parsed but cannot be hashed (nested too deeply to serialise)
            return self._poison(record, exc, receive_count)
        if admission.verdict is Verdict.DEFER:
            return self._requeue(delivery, admission.defer_s, Outcome.DEFERRED, admission.reason)
        if admission.verdict is not Verdict.RUN:
            if admission.verdict is not Verdict.REDELIVERED:  # its status already says it succeeded
                delivery.status.skipped(self._clock.now(), f"{admission.verdict}: {admission.reason}")
            log.info("job skipped (%s): %s", admission.verdict, admission.reason, extra=delivery.keys)
            return delivery.result(_SKIPPED[admission.verdict], dedup_unavailable=admission.unavailable)
        return self._run(job, delivery, admission, context)

    def _served_type(self, name: str) -> JobType:
        if name not in self.queue.types:
            served = f"queue {self.queue.name!r} serves {', '.join(self.queue.types)}"
            if name in self.declaration.types:  # a type this runner's jobs push
                other = self.declaration.types[name].queue
                problem = f"it is a type of queue {other!r}, not of this runner's ({served})"
            else:
                problem = f"not a type of this runner's queue ({served})"
            raise UnknownJobType(name, problem)
        return self.declaration.types[name]

    def _attempts_before(self, record: Mapping[str, Any], spec: JobSpecification) -> int:
        # Only a message the runner re-enqueued has earlier attempts, and only the
        # jobs table knows how many: the attribute just says where to look.
        if self._dedup is None or DEFERRED_ATTRIBUTE not in (record.get("messageAttributes") or {}):
            return 0
        return self._dedup.attempts_before(spec.type, record["messageId"])

    # -- past the last attempt -----------------------------------------------------------

    def _past_last_attempt(self, delivery: _Delivery) -> RecordResult | None:
        """This receive comes after the type's last attempt. What the jobs table
        says of that attempt decides, so the DLQ never shows a reason that is
        not true: it succeeded (only its delete was lost), it never finished
        (killed or timed out), or it was never made on this message (the
        receives went to a batch that died first): then this is it."""
        final = self._recorded_final(delivery)
        if final is None:
            log.warning(
                "receive %d of %s %s: no final attempt is recorded for this message; making it now",
                delivery.receive_count,
                delivery.spec.type,
                delivery.spec.id,
                extra=delivery.keys,
            )
            return None
        runs, attempt = final
        if attempt.succeeded_at is not None:
            log.info("its final attempt succeeded; only the delete was lost", extra=delivery.keys)
            return delivery.result(Outcome.REDELIVERED)
        failure = next((f for f in runs.failures if f.attempt == attempt.attempt), None)
        if failure is not None and failure.error_class != TIMED_OUT:
            error: BaseException = JobFailed(
                f"attempt {attempt.attempt} failed: {failure.error_class}: {failure.message}"
            )
        elif failure is not None:
            error = JobFailed(f"attempt {attempt.attempt} did not finish: timed out ({failure.message})")
        else:
            error = JobFailed(
                f"attempt {attempt.attempt} did not finish: the invocation stopped before it reported"
                " (out of memory, a crash, or a timeout)"
            )
        final_delivery = replace(delivery, attempt=attempt.attempt)
        return self._dead_letter_after_failure(final_delivery, "attempts_exhausted", error, str(error), {})

    def _recorded_final(self, delivery: _Delivery) -> tuple[JobRuns, FinalAttempt] | None:
        if self._dedup is None:
            return None
        try:
            runs = self._dedup.runs(delivery.ref)
        except Exception as exc:  # fail-open: the job gets one more attempt rather than a guessed reason
            log.warning("could not read the final attempt of %s: %s", delivery.spec.id, exc, extra=delivery.keys)
            return None
        final = runs.final
        return (runs, final) if final is not None and final.message_id == delivery.message_id else None

    # -- running ----------------------------------------------------------------------------

    def _job_context(self, delivery: _Delivery, context: LambdaContext | None) -> JobContext:
        factory, spec = self._group_factory, delivery.spec
        job_context = JobContext(attempt=delivery.attempt, job_type=delivery.job_type, status=delivery.status)
        if context is not None:
            job_context.remaining_ms = context.get_remaining_time_in_millis
        if factory is not None:
            # One group per attempt: it derives the IDs of the jobs this attempt pushes.
            job_context._queue_group = functools.cache(lambda: factory(spec.domain).for_job(spec))
        return job_context

    def _status_tracker(self, spec: JobSpecification, job_type: JobType, attempt: int) -> StatusTracker:
        # Untracked types get the tracker that writes nothing: they cost no request.
        if not job_type.track_status or self._dedup is None:
            return NO_STATUS
        return RecordingStatusTracker(self._dedup.backend, spec, attempt, self._clock)

    def _admit(self, job: Job, delivery: _Delivery, context: LambdaContext | None) -> Admission:
        if self._dedup is None:
            return Admission(Verdict.RUN)
        ignore_duplicates = job.ignore_duplicates()
        remaining_s = context.get_remaining_time_in_millis() / 1000 if context else delivery.job_type.timeout_s
        return self._dedup.admit(
            Candidate(
                spec=delivery.spec,
                ignore_duplicates=ignore_duplicates,
                dedup_hash=job.dedup_hash() if ignore_duplicates else None,
                deliver_once=delivery.job_type.deliver_once,
                lease_until=self._clock.now() + remaining_s,
            )
        )

    def _run(self, job: Job, delivery: _Delivery, admission: Admission, context: LambdaContext | None) -> RecordResult:
        spec = delivery.spec
        started = self._clock.now()
        delivery.status.started(started)
        final = self._record_final(delivery, started) if delivery.attempt >= delivery.job_type.max_attempts else None
        log.info("running %s %s, attempt %d", spec.type, spec.id, delivery.attempt, extra=delivery.keys)
        log.debug("job params", extra={**delivery.keys, "params": spec.params})
        alarm = self._watch(delivery, context, started)
        succeeded = False
        error: BaseException | None = None
        try:
            succeeded = job.run() is not False
        except Exception as exc:
            error = exc
        finally:
            self._tear_down(job, succeeded, delivery)
            if alarm is not None:
                alarm.cancel()
        finished = self._clock.now()
        settled = self._settle(admission, succeeded=succeeded, started_at=started)
        fields = {
            "started_at": started,
            "pickup_delay_ms": max(0.0, started - (spec.ready_at or started)) * 1000,
            "root_job_age_ms": (
                max(0.0, started - spec.root_job_timestamp) * 1000 if spec.root_job_timestamp is not None else None
            ),
            "run_time_ms": (finished - started) * 1000,
            "dedup_unavailable": admission.unavailable or not settled,
        }
        if succeeded:
            if final is not None and self._dedup is not None:
                self._dedup.record_final(replace(final, succeeded_at=finished))
            delivery.status.succeeded(finished)
            log.info(
                "%s %s succeeded", spec.type, spec.id, extra={**delivery.keys, "run_time_ms": fields["run_time_ms"]}
            )
            return delivery.result(Outcome.SUCCEEDED, **fields)
        if error is None:
            error = JobFailed(f"{type(job).__name__}.run() returned False")
        return self._fail(delivery, error, job, permanent=_is_permanent(job, error), fields=fields)

    def _record_final(self, delivery: _Delivery, started: float) -> FinalAttempt | None:
        if self._dedup is None:
            return None
        final = FinalAttempt(delivery.ref, delivery.attempt, delivery.message_id, started)
        self._dedup.record_final(final)
        return final

    def _watch(self, delivery: _Delivery, context: LambdaContext | None, started: float) -> Alarm | None:
        if context is None:
            return None
        spec = delivery.spec

        def failure(at: float, message: str) -> FailureRecord:
            return FailureRecord(spec.id, spec.type, spec.domain, delivery.attempt, at, TIMED_OUT, message, "")

        return self._watchdog.watch(
            failure,
            deadline=started + context.get_remaining_time_in_millis() / 1000,
            timeout_s=self.queue.timeout_s,
            on_fire=delivery.status.timed_out,
            keys=delivery.keys,
        )

    def _settle(self, admission: Admission, *, succeeded: bool, started_at: float) -> bool:
        return self._dedup.finish(admission, succeeded=succeeded, started_at=started_at) if self._dedup else True

    def _tear_down(self, job: Job, succeeded: bool, delivery: _Delivery) -> None:
        try:
            job.tear_down(succeeded)
        except Exception:
            log.exception("tear_down failed; the attempt's outcome stands", extra=delivery.keys)

    # -- failures ------------------------------------------------------------------------

    def _fail(
        self, delivery: _Delivery, error: BaseException, job: Job | None, *, permanent: bool, fields: dict[str, Any]
    ) -> RecordResult:
        message = error_message(job, error)
        if permanent or delivery.attempt >= delivery.job_type.max_attempts:
            kind = "non_retryable" if permanent else "attempts_exhausted"
            return self._dead_letter_after_failure(delivery, kind, error, message, fields)
        if not self._record_failure(delivery, error, message, None):
            fields = {**fields, "dedup_unavailable": True}
        delay = retry_delay_s(delivery.job_type.backoff, delivery.attempt, self._rng)
        spec = delivery.spec
        log.warning(
            "%s %s failed on attempt %d, retrying in %ss: %s",
            spec.type,
            spec.id,
            delivery.attempt,
            delay,
            describe(error, message),
            extra={**delivery.keys, "attempt": delivery.attempt, "traceback": traceback_tail(error, message)},
        )
        delivery.status.failed(self._clock.now(), describe(error, message), will_retry=True)
        try:
            self._queues.change_visibility(delivery.record["receiptHandle"], delay)
        except Exception:  # the queue's own visibility timeout applies instead
            log.warning("could not set the retry backoff", exc_info=True, extra=delivery.keys)
        return delivery.result(Outcome.RETRIED, error=describe(error, message), **fields)

    def _record_failure(self, delivery: _Delivery, error: BaseException, message: str, reason: str | None) -> bool:
        if self._dedup is None:
            return True
        spec = delivery.spec
        record = FailureRecord(
            spec.id,
            spec.type,
            spec.domain,
            delivery.attempt,
            self._clock.now(),
            type(error).__name__,
            message,
            traceback_tail(error, message),
            dead_letter_reason=reason,
        )
        return self._dedup.record_failure(record)

    def _dead_letter_after_failure(
        self, delivery: _Delivery, kind: str, error: BaseException, message: str, fields: dict[str, Any]
    ) -> RecordResult:
        spec = delivery.spec
        if not self._record_failure(delivery, error, message, kind):
            fields = {**fields, "dedup_unavailable": True}
        log.error(
            "%s %s failed on attempt %d, dead-lettered (%s): %s",
            spec.type,
            spec.id,
            delivery.attempt,
            kind,
            describe(error, message),
            extra={**delivery.keys, "attempt": delivery.attempt, "traceback": traceback_tail(error, message)},
        )
        reason = DeadLetterReason(kind, type(error).__name__, message, delivery.attempt)
        dead = self._dead_letter(delivery.record, reason, delivery.keys)
        delivery.status.failed(self._clock.now(), describe(error, message), will_retry=not dead)
        outcome = Outcome.DEAD_LETTERED if dead else Outcome.RETRIED
        return delivery.result(outcome, error=describe(error, message), **fields)

    def _poison(
        self, record: Mapping[str, Any], error: Exception, receive_count: int, spec: JobSpecification | None = None
    ) -> RecordResult:
        # The attribute is the sender's word: only a type this runner serves may
        # become a metric dimension and a log key, not any string a message carries.
        claimed = spec.type if spec is not None else _attribute(record, TYPE_ATTRIBUTE)
        job_type = claimed if claimed is not None and claimed in self.queue.types else UNKNOWN_TYPE
        message_id = record.get("messageId")
        log.error(
            "poison message %s dead-lettered: %s",
            message_id,
            describe(error, str(error)),
            extra={"message_id": message_id, "job_type": job_type},
        )
        if spec is not None and self._dedup is not None:  # parsed, but its class did not resolve
            failure = FailureRecord(
                spec.id, spec.type, spec.domain, receive_count, self._clock.now(), type(error).__name__, str(error), ""
            )
            self._dedup.record_failure(replace(failure, dead_letter_reason="poison"))
        reason = DeadLetterReason("poison", type(error).__name__, str(error), receive_count)
        outcome = Outcome.POISONED if self._dead_letter(record, reason, {"job_type": job_type}) else Outcome.RETRIED
        return RecordResult(
            record["messageId"], job_type, outcome, attempt=receive_count, error=describe(error, str(error))
        )

    def _internal_error(self, record: Mapping[str, Any], error: Exception) -> RecordResult:
        """A bug in jobkit: retried, so a fix deployed meanwhile runs the job; on the
        queue's last receive it is dead-lettered with the error, never moved by
        the redrive policy without a word."""
        receive_count = _receive_count(record)
        message_id = str(record.get("messageId", "?"))
        if receive_count >= self.queue.max_receive_count:
            reason = DeadLetterReason("internal_error", type(error).__name__, str(error), receive_count)
            if self._dead_letter(record, reason, {"message_id": message_id}):
                return RecordResult(message_id, UNKNOWN_TYPE, Outcome.DEAD_LETTERED, error=describe(error, str(error)))
        return RecordResult(message_id, UNKNOWN_TYPE, Outcome.RETRIED, error=describe(error, str(error)))

    def _dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, keys: dict[str, Any]) -> bool:
        try:
            self._queues.dead_letter(record, reason, self._clock.now())
            return True
        except Exception:
            # The original stays in the queue; the redrive policy moves it to the
            # DLQ once its receive count passes maxReceiveCount.
            log.exception("could not move a message to the DLQ; leaving it for the redrive policy", extra=keys)
            return False

    # -- re-enqueueing -----------------------------------------------------------------------

    def _hop(self, delivery: _Delivery, remaining_s: float) -> RecordResult:
        """Re-enqueue a job that is not released yet: the same body, a new delay. Not an attempt."""
        delay = min(MAX_DELAY_S, max(1, int(-(-remaining_s // 1))))
        return self._requeue(
            replace(delivery, attempt=delivery.prior_attempts + 1), delay, Outcome.DELAYED, "not released yet"
        )

    def _requeue(self, delivery: _Delivery, delay_s: int, outcome: Outcome, why: str) -> RecordResult:
        """Send the job again as a new message (a delay hop, or a deferral while a
        twin runs): the same body, so the same enqueue time. Neither is an
        attempt: the attempts made so far are recorded for the new message."""
        used = delivery.attempt - 1
        marker = {DEFERRED_ATTRIBUTE: string_attribute("1")} if used and self._dedup is not None else None
        try:
            message_id = self._queues.requeue(delivery.record, delay_s, marker)
        except Exception as exc:
            # The message stays; it comes back after its visibility timeout.
            log.warning(
                "could not re-enqueue (%s); the message will be redelivered", why, exc_info=True, extra=delivery.keys
            )
            return delivery.result(Outcome.RETRIED, error=describe(exc, str(exc)))
        if marker is not None and self._dedup is not None:
            self._dedup.record_deferral(delivery.spec.type, message_id, used)
        log.info("re-enqueued for %ss: %s", delay_s, why, extra=delivery.keys)
        return delivery.result(outcome)


def _receive_count(record: Mapping[str, Any]) -> int:
    try:
        return max(1, int(record.get("attributes", {}).get("ApproximateReceiveCount", "1")))
    except (TypeError, ValueError):
        return 1


def _check_size(record: Mapping[str, Any]) -> None:
    """A job is at most :data:`~jobkit.sqs.MAX_JOB_BYTES` with its attributes, so
    that the runner can always re-enqueue it; a bigger message came from another
    producer (or a hand-made event) and is poison, not a job to run."""
    body = record["body"]
    if not isinstance(body, str):
        raise SpecError(f"message body must be text, got {type(body).__name__}")
    attributes = record.get("messageAttributes") or {}
    rough = len(body) + sum(len(name) + 32 + len(str(a.get("stringValue") or "")) for name, a in attributes.items())
    if 4 * rough <= MAX_JOB_BYTES:
        return
    size = message_size(
        body.encode("utf-8", "surrogatepass").decode("utf-8", "replace"), sendable_attributes(attributes)
    )
    if size > MAX_JOB_BYTES:
        raise SpecError(
            f"message is {size} bytes with its attributes, over the {MAX_JOB_BYTES} a job may have"
            " (the SQS limit less the room the runner needs to re-enqueue it)"
        )


def _is_permanent(job: Job, error: BaseException) -> bool:
    if isinstance(error, NonRetryableError):
        return True
    try:
        return not job.allow_retries()
    except Exception:
        log.exception("allow_retries() raised; retrying")
        return False


def _attribute(record: Mapping[str, Any], name: str) -> str | None:
    attribute = (record.get("messageAttributes") or {}).get(name) or {}
    value = attribute.get("stringValue")
    return value if isinstance(value, str) else None
