"""The runner: turns an SQS event into job runs and reports partial batch failures.

One :class:`Runner` serves one Lambda container. Per record it

1. parses the spec and resolves the class from the declaration; a message that
   fails either is *poison*: it goes to the DLQ with the reason, alone;
2. re-enqueues a job whose release time is still ahead (a delay hop, not an attempt);
3. asks the dedup store whether the job runs: it may be superseded by a newer
   root job, a duplicate of a later successful run, a redelivery of a
   ``deliver_once`` job that already ran, or deferred while its twin runs;
4. runs the job, then ``tear_down(succeeded)``, and settles its claims;
5. on failure, writes a failure record, then hides the message for an
   exponential backoff and reports it as a batch item failure, or dead-letters
   it with the reason when it may not retry or has used its last attempt.

Nothing here can crash a batch: every record ends with a result. This module
talks to AWS only through injected ports and never imports boto3.
"""

from __future__ import annotations

import logging
import random
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from jobkit.backoff import retry_delay_s
from jobkit.clock import Clock, SystemClock
from jobkit.config import Declaration, JobType
from jobkit.dedup import Admission, Candidate, DedupStore, FailureRecord, Verdict
from jobkit.errors import JobClassError, JobFailed, NonRetryableError, SpecError
from jobkit.job import Job, JobContext
from jobkit.outcome import Outcome, RecordResult
from jobkit.registry import JobRegistry
from jobkit.spec import JobSpecification
from jobkit.sqs import MAX_DELAY_S, MAX_MESSAGE_BYTES, TYPE_ATTRIBUTE, DeadLetterReason
from jobkit.status import NO_STATUS, RecordingStatusTracker, StatusTracker

if TYPE_CHECKING:
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

    def change_visibility(self, queue_arn: str, receipt_handle: str, seconds: int) -> None: ...

    def dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, now: float) -> None: ...

    def requeue(self, record: Mapping[str, Any], body: str, delay_s: int) -> None: ...


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
    """Runs the jobs of SQS batches.

    Args:
        declaration: the job types this runner may run.
        queues: SQS operations (backoff, dead-lettering, re-enqueueing).
        dedup: the dedup store; without one, jobs run without de-duplication
            and no failure records are written.
        group_factory: makes the push SDK that jobs use to push more jobs, per domain.
        metrics: receives one :class:`RecordResult` per record; flushed per batch.
        clock: the time source (tests and the local stack move it).
        rng: randomness for backoff jitter.
    """

    def __init__(
        self,
        declaration: Declaration,
        *,
        queues: QueuePort,
        dedup: DedupStore | None = None,
        group_factory: Callable[[str | None], JobQueueGroup] | None = None,
        metrics: MetricsPort | None = None,
        clock: Clock | None = None,
        registry: JobRegistry | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.declaration = declaration
        self._queues = queues
        self._dedup = dedup
        self._group_factory = group_factory
        self._metrics = metrics
        self._clock = clock or SystemClock()
        self._registry = registry or JobRegistry(declaration)
        self._rng = rng or random.Random()

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
            return RecordResult(record.get("messageId", "?"), UNKNOWN_TYPE, Outcome.RETRIED, error=_describe(exc))

    def _handle(self, record: Mapping[str, Any], context: LambdaContext | None) -> RecordResult:
        receive_count = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        try:
            _check_size(record["body"])
            spec = JobSpecification.from_message(record["body"])
            job_type = self.declaration.job_type(spec.type)
            job_class = self._registry.resolve(spec.type)
        except (SpecError, JobClassError) as exc:
            return self._poison(record, exc, receive_count)
        attempt = spec.prior_attempts + receive_count
        delivery = _Delivery(
            record, spec, job_type, attempt, receive_count, self._status_tracker(spec, job_type, attempt)
        )

        now = self._clock.now()
        if spec.release_at is not None and spec.release_at > now:
            return self._hop(delivery, spec.release_at - now)
        try:
            job = job_class(spec, self._job_context(delivery, context))
        except Exception as exc:  # the job's own constructor failed: a failed attempt
            return self._fail(delivery, exc, permanent=isinstance(exc, NonRetryableError), fields={})
        try:
            admission = self._admit(job, delivery, context)
        except SpecError as exc:  # params that parsed but cannot be hashed (nested too deeply to serialise)
            return self._poison(record, exc, receive_count)
        if admission.verdict is Verdict.DEFER:
            return self._defer(delivery, admission)
        if admission.verdict is not Verdict.RUN:
            if admission.verdict is not Verdict.REDELIVERED:  # its status already says it succeeded
                delivery.status.skipped(self._clock.now(), f"{admission.verdict}: {admission.reason}")
            log.info("job skipped (%s): %s", admission.verdict, admission.reason, extra=delivery.keys)
            return delivery.result(_SKIPPED[admission.verdict], dedup_unavailable=admission.unavailable)
        if delivery.attempt > job_type.max_attempts:
            return self._exhausted_unreported(delivery, admission)
        return self._run(job, delivery, admission)

    def _exhausted_unreported(self, delivery: _Delivery, admission: Admission) -> RecordResult:
        """The last allowed attempt never reported back: a timeout, a crash, or a
        lost delete after it succeeded. Admission came first, so a ``deliver_once``
        job that already ran, a duplicate, or a superseded leaf was acknowledged as
        such above; anything else is dead-lettered, and the claims just taken are
        released so twins run."""
        if self._dedup is not None:
            self._dedup.finish(admission, succeeded=False, started_at=self._clock.now())
        error = JobFailed(f"attempt {delivery.attempt - 1} did not finish (timed out or crashed)")
        return self._dead_letter_after_failure(delivery, "attempts_exhausted", error, {})

    def _job_context(self, delivery: _Delivery, context: LambdaContext | None) -> JobContext:
        factory, domain = self._group_factory, delivery.spec.domain
        job_context = JobContext(attempt=delivery.attempt, job_type=delivery.job_type, status=delivery.status)
        if context is not None:
            job_context.remaining_ms = context.get_remaining_time_in_millis
        if factory is not None:
            job_context._queue_group = lambda: factory(domain)
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

    def _run(self, job: Job, delivery: _Delivery, admission: Admission) -> RecordResult:
        spec = delivery.spec
        started = self._clock.now()
        delivery.status.started(started)
        log.info("running %s %s, attempt %d", spec.type, spec.id, delivery.attempt, extra=delivery.keys)
        log.debug("job params", extra={**delivery.keys, "params": spec.params})
        succeeded = False
        error: BaseException | None = None
        try:
            succeeded = job.run() is not False
        except Exception as exc:
            error = exc
        finally:
            self._tear_down(job, succeeded, delivery)
        finished = self._clock.now()
        settled = self._dedup.finish(admission, succeeded=succeeded, started_at=started) if self._dedup else True
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
            delivery.status.succeeded(finished)
            log.info(
                "%s %s succeeded", spec.type, spec.id, extra={**delivery.keys, "run_time_ms": fields["run_time_ms"]}
            )
            return delivery.result(Outcome.SUCCEEDED, **fields)
        if error is None:
            error = JobFailed(f"{type(job).__name__}.run() returned False")
        return self._fail(delivery, error, permanent=_is_permanent(job, error), fields=fields)

    def _tear_down(self, job: Job, succeeded: bool, delivery: _Delivery) -> None:
        try:
            job.tear_down(succeeded)
        except Exception:
            log.exception("tear_down failed; the attempt's outcome stands", extra=delivery.keys)

    # -- failures ------------------------------------------------------------------------

    def _fail(
        self, delivery: _Delivery, error: BaseException, *, permanent: bool, fields: dict[str, Any]
    ) -> RecordResult:
        if not self._record_failure(delivery, error):
            fields = {**fields, "dedup_unavailable": True}
        if permanent:
            return self._dead_letter_after_failure(delivery, "non_retryable", error, fields)
        if delivery.attempt >= delivery.job_type.max_attempts:
            return self._dead_letter_after_failure(delivery, "attempts_exhausted", error, fields)
        delay = retry_delay_s(delivery.job_type.backoff, delivery.attempt, self._rng)
        spec = delivery.spec
        log.warning(
            "%s %s failed on attempt %d, retrying in %ss: %s",
            spec.type,
            spec.id,
            delivery.attempt,
            delay,
            _describe(error),
            extra={**delivery.keys, "attempt": delivery.attempt, "traceback": _traceback_tail(error)},
        )
        delivery.status.failed(self._clock.now(), _describe(error), will_retry=True)
        try:
            record = delivery.record
            self._queues.change_visibility(record["eventSourceARN"], record["receiptHandle"], delay)
        except Exception:  # the queue's own visibility timeout applies instead
            log.warning("could not set the retry backoff", exc_info=True, extra=delivery.keys)
        return delivery.result(Outcome.RETRIED, error=_describe(error), **fields)

    def _record_failure(self, delivery: _Delivery, error: BaseException) -> bool:
        if self._dedup is None:
            return True
        spec = delivery.spec
        return self._dedup.record_failure(
            FailureRecord(
                job_id=spec.id,
                job_type=spec.type,
                domain=spec.domain,
                attempt=delivery.attempt,
                at=self._clock.now(),
                error_class=type(error).__name__,
                message=str(error)[:4096],
                traceback=_traceback_tail(error),
            )
        )

    def _dead_letter_after_failure(
        self, delivery: _Delivery, kind: str, error: BaseException, fields: dict[str, Any]
    ) -> RecordResult:
        spec = delivery.spec
        log.error(
            "%s %s failed on attempt %d, dead-lettered (%s): %s",
            spec.type,
            spec.id,
            delivery.attempt,
            kind,
            _describe(error),
            extra={**delivery.keys, "attempt": delivery.attempt, "traceback": _traceback_tail(error)},
        )
        reason = DeadLetterReason(kind, type(error).__name__, str(error), delivery.attempt)
        outcome = (
            Outcome.DEAD_LETTERED if self._dead_letter(delivery.record, reason, delivery.keys) else Outcome.RETRIED
        )
        delivery.status.failed(self._clock.now(), _describe(error), will_retry=outcome is Outcome.RETRIED)
        return delivery.result(outcome, error=_describe(error), **fields)

    def _poison(self, record: Mapping[str, Any], error: Exception, receive_count: int) -> RecordResult:
        # The attribute is the sender's word: only a declared type may become a
        # metric dimension and a log key, not any string a message carries.
        claimed_type = _attribute(record, TYPE_ATTRIBUTE)
        job_type = claimed_type if claimed_type is not None and claimed_type in self.declaration.types else UNKNOWN_TYPE
        message_id = record.get("messageId")
        log.error(
            "poison message %s dead-lettered: %s",
            message_id,
            _describe(error),
            extra={"message_id": message_id, "job_type": job_type},
        )
        reason = DeadLetterReason("poison", type(error).__name__, str(error), receive_count)
        outcome = Outcome.POISONED if self._dead_letter(record, reason, {"job_type": job_type}) else Outcome.RETRIED
        return RecordResult(record["messageId"], job_type, outcome, attempt=receive_count, error=_describe(error))

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
        return self._requeue(delivery, delivery.record["body"], delay, Outcome.DELAYED, "not released yet")

    def _defer(self, delivery: _Delivery, admission: Admission) -> RecordResult:
        """Re-enqueue a twin while an identical job runs. Keeps the original enqueue
        time; this delivery does not count as an attempt."""
        body = delivery.spec.replace(prior_attempts=delivery.attempt - 1).to_message()
        return self._requeue(delivery, body, admission.defer_s, Outcome.DEFERRED, admission.reason)

    def _requeue(self, delivery: _Delivery, body: str, delay_s: int, outcome: Outcome, why: str) -> RecordResult:
        try:
            self._queues.requeue(delivery.record, body, delay_s)
        except Exception as exc:
            # The message stays; it comes back after its visibility timeout.
            log.warning(
                "could not re-enqueue (%s); the message will be redelivered", why, exc_info=True, extra=delivery.keys
            )
            return delivery.result(Outcome.RETRIED, error=_describe(exc))
        log.info("re-enqueued for %ss: %s", delay_s, why, extra=delivery.keys)
        return delivery.result(outcome)


def _check_size(body: Any) -> None:
    """SQS never delivers more than 1 MiB; a bigger body came some other way
    (a hand-made event) and is poison, not a job to run."""
    if isinstance(body, str) and len(body) > MAX_MESSAGE_BYTES // 4:
        size = len(body.encode("utf-8", "surrogatepass"))
        if size > MAX_MESSAGE_BYTES:
            raise SpecError(f"message body is {size} bytes, over the SQS limit of {MAX_MESSAGE_BYTES}")


def _is_permanent(job: Job, error: BaseException) -> bool:
    if isinstance(error, NonRetryableError):
        return True
    try:
        return not job.allow_retries()
    except Exception:
        log.exception("allow_retries() raised; retrying")
        return False


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _traceback_tail(error: BaseException, lines: int = 12) -> str:
    formatted = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return "\n".join(formatted.splitlines()[-lines:])


def _attribute(record: Mapping[str, Any], name: str) -> str | None:
    attribute = (record.get("messageAttributes") or {}).get(name) or {}
    value = attribute.get("stringValue")
    return value if isinstance(value, str) else None
