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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobkit.attempts import Attempts
from jobkit.clock import Clock, SystemClock
from jobkit.config import Declaration, JobType
from jobkit.dedup import Admission, Candidate, DedupStore, Verdict
from jobkit.delivery import (
    Delivery,
    LambdaContext,
    MetricsPort,
    QueuePort,
    check_size,
    enqueued_at,
    message_id_of,
    receive_count,
)
from jobkit.error_text import describe
from jobkit.errors import JobClassError, JobFailed, NonRetryableError, SpecError, UnknownJobType
from jobkit.failures import Failures, is_permanent
from jobkit.job import Job, JobContext
from jobkit.outcome import Outcome, RecordResult
from jobkit.records import FailureRecord
from jobkit.registry import JobRegistry
from jobkit.spec import JobSpecification
from jobkit.sqs import DEFERRED_ATTRIBUTE, ENQUEUED_AT_ATTRIBUTE, MAX_DELAY_S, number_attribute, string_attribute
from jobkit.status import NO_STATUS, RecordingStatusTracker, StatusTracker
from jobkit.watchdog import TIMED_OUT, DeadlineWatchdog

if TYPE_CHECKING:
    from jobkit.clock import Alarm
    from jobkit.push import JobQueueGroup

log = logging.getLogger(__name__)

_SKIPPED = {
    Verdict.SUPERSEDED: Outcome.SUPERSEDED,
    Verdict.DUPLICATE: Outcome.DUPLICATE,
    Verdict.REDELIVERED: Outcome.REDELIVERED,
}

__all__ = ["LambdaContext", "MetricsPort", "QueuePort", "Runner"]


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
        self._failures = Failures(self.queue, queues, dedup, self._clock, rng or random.Random())
        self._attempts = Attempts(dedup)
        self._watchdog = DeadlineWatchdog(self._clock, dedup.record_failure if dedup else lambda _: None)

    @property
    def _rng(self) -> random.Random:
        """Backoff jitter (tests reseed it)."""
        return self._failures.rng

    def handle(self, event: Mapping[str, Any], context: LambdaContext | None = None) -> dict[str, Any]:
        """The Lambda handler body: returns ``{"batchItemFailures": [...]}``."""
        results = self.process(event, context)
        return {"batchItemFailures": [{"itemIdentifier": r.message_id} for r in results if r.report_failure]}

    def process(self, event: Mapping[str, Any], context: LambdaContext | None = None) -> list[RecordResult]:
        """Handle every record of an SQS event and return what happened to each."""
        records = event.get("Records") if isinstance(event, Mapping) else None
        results = [self._handle_safely(record, context) for record in (records if isinstance(records, list) else [])]
        if self._metrics is not None:
            try:
                for result in results:
                    self._metrics.record(result)
                self._metrics.flush()
            except Exception:  # metrics never fail a job
                log.warning("could not emit metrics", exc_info=True)
        return results

    # -- one record ------------------------------------------------------------------

    def _handle_safely(self, record: Any, context: LambdaContext | None) -> RecordResult:
        try:
            if not isinstance(record, Mapping):
                raise TypeError(f"an SQS event record is an object, got {type(record).__name__}")
            return self._handle(record, context)
        except Exception as exc:  # a bug in jobkit itself, or a hand-made record: never crash the batch
            log.exception("internal error handling message %s", message_id_of(record))
            return self._failures.internal_error(record, exc)

    def _handle(self, record: Mapping[str, Any], context: LambdaContext | None) -> RecordResult:
        try:
            check_size(record)
            spec = JobSpecification.from_message(record["body"])
            spec.check_times(self._clock.now())
            job_type = self._served_type(spec.type)
        except SpecError as exc:
            return self._failures.poison(record, exc)
        try:
            job_class = self._registry.resolve(spec.type)
        except JobClassError as exc:
            return self._failures.poison(record, exc, spec)
        received = receive_count(record)
        spec = spec.replace(enqueued_at=enqueued_at(record, spec))
        delivery = Delivery(record, spec, job_type, self._attempts.before(record, spec.type) + received, received)
        if spec.release_at is not None and spec.release_at > self._clock.now():
            return self._hop(delivery, spec.release_at - self._clock.now())
        if delivery.attempt > job_type.max_attempts:
            settled = self._past_last_attempt(delivery)
            if settled is not None:
                return settled
            delivery = replace(delivery, attempt=job_type.max_attempts)
        delivery = replace(delivery, status=self._status_tracker(spec, job_type, delivery.attempt))
        try:
            job = job_class(spec, self._job_context(delivery, context))
        except Exception as exc:  # the job's own constructor failed: a failed attempt
            return self._failures.fail(delivery, exc, None, permanent=isinstance(exc, NonRetryableError), fields={})
        try:
            admission = self._admit(job, delivery, context)
        except SpecError as exc:  # params that parsed but cannot be hashed (nested too deeply to serialise)
            return self._failures.poison(record, exc)
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

    def _past_last_attempt(self, delivery: Delivery) -> RecordResult | None:
        """This receive comes after the type's last attempt: what the jobs table
        says of that attempt decides, so the DLQ never shows a reason that is
        not true. None: no final attempt was made on this message; make it now."""
        last = self._attempts.last(delivery)
        if last is None:
            log.warning(
                "receive %d: no final attempt is recorded for this message; making it now",
                delivery.receive_count,
                extra=delivery.keys,
            )
            return None
        if last.succeeded:
            log.info("its final attempt succeeded; only the delete was lost", extra=delivery.keys)
            return delivery.result(Outcome.REDELIVERED)
        error = last.error or JobFailed(f"attempt {last.attempt} did not finish")
        final = replace(delivery, attempt=last.attempt)
        return self._failures.dead_letter(final, "attempts_exhausted", error, str(error), {})

    # -- running ----------------------------------------------------------------------------

    def _job_context(self, delivery: Delivery, context: LambdaContext | None) -> JobContext:
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

    def _admit(self, job: Job, delivery: Delivery, context: LambdaContext | None) -> Admission:
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

    def _run(self, job: Job, delivery: Delivery, admission: Admission, context: LambdaContext | None) -> RecordResult:
        spec = delivery.spec
        started = self._clock.now()
        delivery.status.started(started)
        final = self._attempts.started(delivery, started)
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
            if final is not None:
                self._attempts.succeeded(final, finished)
            delivery.status.succeeded(finished)
            log.info(
                "%s %s succeeded", spec.type, spec.id, extra={**delivery.keys, "run_time_ms": fields["run_time_ms"]}
            )
            return delivery.result(Outcome.SUCCEEDED, **fields)
        if error is None:
            error = JobFailed(f"{type(job).__name__}.run() returned False")
        return self._failures.fail(delivery, error, job, permanent=is_permanent(job, error), fields=fields)

    def _watch(self, delivery: Delivery, context: LambdaContext | None, started: float) -> Alarm | None:
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

    def _tear_down(self, job: Job, succeeded: bool, delivery: Delivery) -> None:
        try:
            job.tear_down(succeeded)
        except Exception:
            log.exception("tear_down failed; the attempt's outcome stands", extra=delivery.keys)

    # -- failures ------------------------------------------------------------------------

    # -- re-enqueueing -----------------------------------------------------------------------

    def _hop(self, delivery: Delivery, remaining_s: float) -> RecordResult:
        """Re-enqueue a job that is not released yet: the same body, a new delay. Not an attempt."""
        delay = min(MAX_DELAY_S, max(1, int(-(-remaining_s // 1))))
        return self._requeue(
            replace(delivery, attempt=delivery.prior_attempts + 1), delay, Outcome.DELAYED, "not released yet"
        )

    def _requeue(self, delivery: Delivery, delay_s: int, outcome: Outcome, why: str) -> RecordResult:
        """Send the job again as a new message (a delay hop, or a deferral while a
        twin runs): the same body, so the same enqueue time. Neither is an
        attempt: the attempts made so far are recorded for the new message."""
        used = delivery.attempt - 1
        attributes = {ENQUEUED_AT_ATTRIBUTE: number_attribute(delivery.spec.enqueued_at or 0.0)}
        if used and self._dedup is not None:
            attributes[DEFERRED_ATTRIBUTE] = string_attribute("1")
        try:
            message_id = self._queues.requeue(delivery.record, delay_s, attributes)
        except Exception as exc:
            # The message stays; it comes back after its visibility timeout.
            log.warning(
                "could not re-enqueue (%s); the message will be redelivered", why, exc_info=True, extra=delivery.keys
            )
            return delivery.result(Outcome.RETRIED, error=describe(exc, str(exc)))
        if DEFERRED_ATTRIBUTE in attributes and self._dedup is not None:
            self._dedup.record_deferral(delivery.spec.type, message_id, used)
        log.info("re-enqueued for %ss: %s", delay_s, why, extra=delivery.keys)
        return delivery.result(outcome)
