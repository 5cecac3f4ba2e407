"""The runner: turns an SQS event into job runs and reports partial batch failures.

One :class:`Runner` serves one Lambda container. Per record it

1. parses the spec and resolves the class from the declaration (a message that
   fails either is *poison*: it goes to the DLQ with the reason, alone);
2. re-enqueues a job whose release time is still ahead (a delay hop, not an attempt);
3. runs the job, then ``tear_down(succeeded)``;
4. on failure, hides the message for an exponential backoff and reports it as a
   batch item failure, or dead-letters it with the reason when it may not retry
   or has used its last attempt.

This module talks to SQS only through the injected :class:`~jobkit.sqs.SqsQueues`
port and never imports boto3.
"""

from __future__ import annotations

import logging
import random
import traceback
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from jobkit.backoff import retry_delay_s
from jobkit.clock import Clock, SystemClock
from jobkit.config import Declaration, JobType
from jobkit.errors import JobClassError, JobFailed, NonRetryableError, SpecError
from jobkit.job import Job, JobContext
from jobkit.outcome import Outcome, RecordResult
from jobkit.registry import JobRegistry
from jobkit.spec import JobSpecification
from jobkit.sqs import MAX_DELAY_S, TYPE_ATTRIBUTE, DeadLetterReason

if TYPE_CHECKING:
    from jobkit.push import JobQueueGroup

log = logging.getLogger(__name__)

UNKNOWN_TYPE = "unknown"


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


class Runner:
    """Runs the jobs of SQS batches.

    Args:
        declaration: the job types this runner may run.
        queues: SQS operations (backoff, dead-lettering, re-enqueueing).
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
        group_factory: Callable[[str | None], JobQueueGroup] | None = None,
        metrics: MetricsPort | None = None,
        clock: Clock | None = None,
        registry: JobRegistry | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.declaration = declaration
        self._queues = queues
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

    # -- one record ------------------------------------------------------------

    def _handle_safely(self, record: Mapping[str, Any], context: LambdaContext | None) -> RecordResult:
        try:
            return self._handle(record, context)
        except Exception as exc:  # a bug in jobkit itself: never crash the batch
            log.exception("internal error handling message %s", record.get("messageId"))
            return RecordResult(record.get("messageId", "?"), UNKNOWN_TYPE, Outcome.RETRIED, error=_describe(exc))

    def _handle(self, record: Mapping[str, Any], context: LambdaContext | None) -> RecordResult:
        receive_count = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        try:
            spec = JobSpecification.from_message(record["body"])
            job_type = self.declaration.job_type(spec.type)
            job_class = self._registry.resolve(spec.type)
        except (SpecError, JobClassError) as exc:
            return self._poison(record, exc, receive_count)

        keys = {"job_id": spec.id, "job_type": spec.type, "domain": spec.domain}
        now = self._clock.now()
        if spec.release_at is not None and spec.release_at > now:
            return self._hop(record, spec, now, keys)

        attempt = spec.prior_attempts + receive_count
        job = job_class(spec, self._job_context(spec, job_type, attempt, context))
        return self._run(record, job, job_type, attempt, keys)

    def _job_context(
        self, spec: JobSpecification, job_type: JobType, attempt: int, context: LambdaContext | None
    ) -> JobContext:
        factory = self._group_factory
        job_context = JobContext(attempt=attempt, job_type=job_type)
        if context is not None:
            job_context.remaining_ms = context.get_remaining_time_in_millis
        if factory is not None:
            job_context._queue_group = lambda: factory(spec.domain)
        return job_context

    def _run(
        self, record: Mapping[str, Any], job: Job, job_type: JobType, attempt: int, keys: dict[str, Any]
    ) -> RecordResult:
        spec = job.spec
        started = self._clock.now()
        log.info("running job", extra={**keys, "attempt": attempt})
        log.debug("job params", extra={**keys, "params": spec.params})
        succeeded = False
        error: BaseException | None = None
        try:
            succeeded = job.run() is not False
        except Exception as exc:
            error = exc
        finally:
            self._tear_down(job, succeeded, keys)
        finished = self._clock.now()
        timings = {
            "pickup_delay_ms": max(0.0, started - (spec.ready_at or started)) * 1000,
            "root_job_age_ms": (
                max(0.0, started - spec.root_job_timestamp) * 1000 if spec.root_job_timestamp is not None else None
            ),
            "run_time_ms": (finished - started) * 1000,
        }
        base = {
            "message_id": record["messageId"],
            "job_type": spec.type,
            "job_id": spec.id,
            "domain": spec.domain,
            "attempt": attempt,
            "started_at": started,
            **timings,
        }
        if succeeded:
            log.info("job succeeded", extra={**keys, "run_time_ms": timings["run_time_ms"]})
            return RecordResult(outcome=Outcome.SUCCEEDED, **base)
        if error is None:
            error = JobFailed(f"{type(job).__name__}.run() returned False")
        return self._fail(record, job, job_type, attempt, error, base, keys)

    def _fail(
        self,
        record: Mapping[str, Any],
        job: Job,
        job_type: JobType,
        attempt: int,
        error: BaseException,
        base: dict[str, Any],
        keys: dict[str, Any],
    ) -> RecordResult:
        described = _describe(error)
        tail = _traceback_tail(error)
        permanent = isinstance(error, NonRetryableError) or not job.allow_retries()
        if permanent or attempt >= job_type.max_attempts:
            kind = "non_retryable" if permanent else "attempts_exhausted"
            log.error(
                "%s %s failed on attempt %d, dead-lettered (%s): %s",
                job.type,
                job.id,
                attempt,
                kind,
                described,
                extra={**keys, "attempt": attempt, "traceback": tail},
            )
            reason = DeadLetterReason(kind, type(error).__name__, str(error), attempt)
            if self._dead_letter(record, reason, keys):
                return RecordResult(outcome=Outcome.DEAD_LETTERED, error=described, **base)
            return RecordResult(outcome=Outcome.RETRIED, error=described, **base)
        delay = retry_delay_s(job_type.backoff, attempt, self._rng)
        log.warning(
            "%s %s failed on attempt %d, retrying in %ss: %s",
            job.type,
            job.id,
            attempt,
            delay,
            described,
            extra={**keys, "attempt": attempt, "traceback": tail},
        )
        try:
            self._queues.change_visibility(record["eventSourceARN"], record["receiptHandle"], delay)
        except Exception:  # the queue's own visibility timeout applies instead
            log.warning("could not set retry backoff", exc_info=True, extra=keys)
        return RecordResult(outcome=Outcome.RETRIED, error=described, **base)

    def _tear_down(self, job: Job, succeeded: bool, keys: dict[str, Any]) -> None:
        try:
            job.tear_down(succeeded)
        except Exception:
            log.exception("tear_down failed; the attempt's outcome stands", extra=keys)

    # -- messages that do not run --------------------------------------------------

    def _poison(self, record: Mapping[str, Any], error: Exception, receive_count: int) -> RecordResult:
        job_type = _attribute(record, TYPE_ATTRIBUTE) or UNKNOWN_TYPE
        described = _describe(error)
        log.error(
            "poison message %s dead-lettered: %s",
            record.get("messageId"),
            described,
            extra={"message_id": record.get("messageId"), "job_type": job_type},
        )
        reason = DeadLetterReason("poison", type(error).__name__, str(error), receive_count)
        if self._dead_letter(record, reason, {"job_type": job_type}):
            return RecordResult(record["messageId"], job_type, Outcome.POISONED, error=described)
        return RecordResult(record["messageId"], job_type, Outcome.RETRIED, error=described)

    def _dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, keys: dict[str, Any]) -> bool:
        try:
            self._queues.dead_letter(record, reason, self._clock.now())
            return True
        except Exception:
            # The original stays in the queue; the redrive policy moves it to the
            # DLQ once its receive count passes maxReceiveCount.
            log.exception("could not move message to the DLQ; leaving it for the redrive policy", extra=keys)
            return False

    def _hop(self, record: Mapping[str, Any], spec: JobSpecification, now: float, keys: dict[str, Any]) -> RecordResult:
        """Re-enqueue a job that is not released yet: the original spec, a new delay."""
        assert spec.release_at is not None
        delay = min(MAX_DELAY_S, max(1, int(-(-(spec.release_at - now) // 1))))
        result = {"message_id": record["messageId"], "job_type": spec.type, "job_id": spec.id, "domain": spec.domain}
        try:
            self._queues.requeue(record, record["body"], delay)
        except Exception as exc:
            log.warning("could not re-enqueue a delayed job; it will be redelivered", exc_info=True, extra=keys)
            return RecordResult(outcome=Outcome.RETRIED, error=_describe(exc), **result)
        log.info("job not released yet; re-enqueued for %ss", delay, extra=keys)
        return RecordResult(outcome=Outcome.DELAYED, **result)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _traceback_tail(error: BaseException, lines: int = 12) -> str:
    formatted = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return "\n".join(formatted.splitlines()[-lines:])


def _attribute(record: Mapping[str, Any], name: str) -> str | None:
    attribute = (record.get("messageAttributes") or {}).get(name) or {}
    value = attribute.get("stringValue")
    return value if isinstance(value, str) else None
