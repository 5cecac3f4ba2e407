"""What the runner does with a job that failed, or a message that cannot run.

- A failed attempt writes a failure record; with attempts left, the message is
  hidden for an exponential backoff and reported as a batch item failure.
- A job that may not retry, or has used its last attempt, is dead-lettered:
  the failure record says why (the runner's own word, which the DLQ tools
  trust), then the message is copied to the DLQ with the reason attached.
- A message that cannot be parsed, routed or resolved is poison: straight to
  the DLQ with the reason, alone.
- A bug in jobkit itself is retried, and dead-lettered with its error on the
  queue's last receive, never left for SQS to move without a word.

If the DLQ copy fails, the message stays; SQS's redrive policy moves it once
its receive count passes maxReceiveCount, and the failure record still says why.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jobkit.core.clock import Clock
from jobkit.core.correlation import correlation_of
from jobkit.core.errors import NonRetryableError
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import JobType, QueueConfig
from jobkit.jobs.job import Job
from jobkit.records import FailureRecord
from jobkit.records.journal import AttemptJournal
from jobkit.runner.backoff import retry_delay_s
from jobkit.runner.delivery import Delivery, QueuePort, message_id_of, receive_count, string_attribute_of
from jobkit.runner.error_text import describe, error_message, text_of, traceback_tail
from jobkit.sqs import CORRELATION_ATTRIBUTE, TYPE_ATTRIBUTE, DeadLetterReason
from jobkit.status.tracker import RecordingStatusTracker

log = logging.getLogger(__name__)

UNKNOWN_TYPE = "unknown"


class Failures:
    """Failure handling for the runner of one queue.

    Args:
        queue: the queue served (its types, and its last receive).
        queues: SQS operations.
        journal: the attempt journal, if any.
        clock: the time source.
        rng: randomness for backoff jitter.
    """

    def __init__(
        self, queue: QueueConfig, queues: QueuePort, journal: AttemptJournal | None, clock: Clock, rng: random.Random
    ) -> None:
        self._queue = queue
        self._queues = queues
        self._journal = journal
        self._clock = clock
        self.rng = rng

    def fail(
        self, delivery: Delivery, error: BaseException, job: Job | None, *, permanent: bool, fields: dict[str, Any]
    ) -> RecordResult:
        """An attempt failed: retry it after a backoff, or dead-letter it."""
        message = error_message(job, error)
        if permanent or delivery.attempt >= delivery.job_type.max_attempts:
            kind = "non_retryable" if permanent else "attempts_exhausted"
            return self.dead_letter(delivery, kind, error, message, fields)
        if not self._record(delivery, error, message, None):
            fields = {**fields, "dedup_unavailable": True}
        delay = retry_delay_s(delivery.job_type.backoff, delivery.attempt, self.rng)
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
        try:
            self._queues.change_visibility(delivery.record, delay)
        except Exception:  # the queue's own visibility timeout applies instead
            log.warning("could not set the retry backoff", exc_info=True, extra=delivery.keys)
        return delivery.result(Outcome.RETRIED, error=describe(error, message), exception=error, **fields)

    def dead_letter(
        self, delivery: Delivery, kind: str, error: BaseException, message: str, fields: dict[str, Any]
    ) -> RecordResult:
        """Dead-letter a job for good: the failure record first, then the DLQ copy."""
        spec = delivery.spec
        if not self._record(delivery, error, message, kind):
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
        dead = self._copy_to_dlq(delivery.record, reason, delivery.keys)
        if not dead:  # its copy was not sent: SQS's redrive policy takes it, or it is retried
            return delivery.result(Outcome.RETRIED, error=describe(error, message), exception=error, **fields)
        # (the reason, non_retryable or attempts_exhausted, or the caller's why, is what a tracked job's status says)
        fields = {"reason": kind, **fields}
        return delivery.result(Outcome.DEAD_LETTERED, error=describe(error, message), exception=error, **fields)

    def requeue_failed(self, delivery: Delivery, error: Exception, why: str) -> RecordResult:
        """A delay hop or deferral could not be sent. The message comes back
        after its visibility timeout, and that receive counts toward the
        queue's maxReceiveCount although the job did not run: so the failure is
        recorded, and on the last receive the queue allows the message goes to
        the DLQ now, with the reason, rather than by the redrive policy without one."""
        message = f"could not re-enqueue the job ({why}): {error_message(None, error)}"
        if delivery.receive_count >= self._queue.max_receive_count:
            return self.dead_letter(delivery, "internal_error", error, message, {"reason": why})
        log.warning("%s; the message will be redelivered", message, extra=delivery.keys)
        self._record(delivery, error, message, None, ran=False)
        return delivery.result(Outcome.RETRIED, error=describe(error, message), reason=why, exception=error)

    def poison(
        self,
        record: Mapping[str, Any],
        error: Exception,
        spec: JobSpecification | None = None,
        *,
        tracked: bool = False,
    ) -> RecordResult:
        """A message that cannot run: to the DLQ with the reason, alone (and, for
        a job of a ``track_status`` type, its status says so: ``dead_lettered``)."""
        received = receive_count(record)
        # The attribute is the sender's word: only a type this runner serves may
        # become a metric dimension and a log key, not any string a message carries.
        claimed = spec.type if spec is not None else string_attribute_of(record, TYPE_ATTRIBUTE)
        job_type = claimed if claimed is not None and claimed in self._queue.types else UNKNOWN_TYPE
        message_id = message_id_of(record)
        message = text_of(error)
        text = describe(error, message)
        log.error(
            "poison message %s dead-lettered: %s",
            message_id,
            text,
            extra={"message_id": message_id, "job_type": job_type},
        )
        correlation_id = None
        if spec is not None:  # parsed, but its params or class did not fit
            correlation_id = correlation_of(string_attribute_of(record, CORRELATION_ATTRIBUTE), spec.id)
        if spec is not None:
            self._dead_unrun(spec, received, error, message, "poison", correlation_id, ran=True)
        reason = DeadLetterReason("poison", type(error).__name__, message, received)
        outcome = Outcome.POISONED if self._copy_to_dlq(record, reason, {"job_type": job_type}) else Outcome.RETRIED
        if outcome is Outcome.POISONED and spec is not None and tracked:
            self._status_dead(spec, received, correlation_id, text, "poison")
        return RecordResult(
            message_id,
            job_type,
            outcome,
            job_id=spec.id if spec is not None else None,
            domain=spec.domain if spec is not None else None,
            attempt=received,
            error=text,
            correlation_id=correlation_id,
            exception=error,
            batch=spec.batch if spec is not None and outcome is Outcome.POISONED else None,
        )

    def unavailable(
        self, record: Mapping[str, Any], spec: JobSpecification, job_type: JobType, error: Exception
    ) -> RecordResult:
        """What the job needs before it can start (its params in the payload
        bucket) could not be had now: retried after the type's backoff; on the
        queue's last receive, dead-lettered with the error (its failure record,
        its status, and its batch's count, as for any dead letter)."""
        received, message_id, text = receive_count(record), message_id_of(record), text_of(error)
        correlation_id = correlation_of(string_attribute_of(record, CORRELATION_ATTRIBUTE), spec.id)
        keys = {"message_id": message_id, "job_id": spec.id, "job_type": spec.type, "domain": spec.domain}
        result = functools.partial(
            RecordResult,
            message_id,
            spec.type,
            job_id=spec.id,
            domain=spec.domain,
            attempt=received,
            error=text,
            correlation_id=correlation_id,
            exception=error,
        )
        if received >= self._queue.max_receive_count:
            reason = DeadLetterReason("unavailable", type(error).__name__, text, received)
            if self._copy_to_dlq(record, reason, keys):
                self._dead_unrun(spec, received, error, text, "unavailable", correlation_id, ran=False)
                if job_type.track_status:
                    self._status_dead(spec, received, correlation_id, text, "unavailable")
                return result(Outcome.DEAD_LETTERED, reason="unavailable", batch=spec.batch)
        delay = retry_delay_s(job_type.backoff, received, self.rng)
        log.warning("could not start the job, retrying in %ss: %s", delay, text, extra=keys)
        try:
            self._queues.change_visibility(record, delay)
        except Exception:  # the queue's own visibility timeout applies instead
            log.warning("could not set the retry backoff", exc_info=True, extra=keys)
        return result(Outcome.RETRIED)

    def internal_error(self, record: Any, error: Exception) -> RecordResult:
        """A bug in jobkit, or a record no event source mapping would make:
        retried, so a fix deployed meanwhile runs the job; on the queue's last
        receive it is dead-lettered with the error."""
        received = receive_count(record)
        message_id = message_id_of(record)
        message = text_of(error)
        text = describe(error, message)
        if received >= self._queue.max_receive_count and isinstance(record, Mapping):
            reason = DeadLetterReason("internal_error", type(error).__name__, message, received)
            if self._copy_to_dlq(record, reason, {"message_id": message_id}):
                return RecordResult(message_id, UNKNOWN_TYPE, Outcome.DEAD_LETTERED, error=text, exception=error)
        return RecordResult(message_id, UNKNOWN_TYPE, Outcome.RETRIED, error=text, exception=error)

    def _dead_unrun(
        self,
        spec: JobSpecification,
        received: int,
        error: Exception,
        message: str,
        kind: str,
        correlation_id: str | None,
        *,
        ran: bool,
    ) -> None:
        """The failure record of a message dead-lettered before it became a
        delivery (poison, or what it needed could not be had)."""
        if self._journal is None:
            return
        failure = FailureRecord(
            spec.id, spec.type, spec.domain, received, self._clock.now(), type(error).__name__, message, ""
        )
        self._journal.record_failure(replace(failure, dead_letter_reason=kind, correlation_id=correlation_id, ran=ran))

    def _status_dead(
        self, spec: JobSpecification, received: int, correlation_id: str | None, text: str, kind: str
    ) -> None:
        """A ``track_status`` job's status: dead-lettered, for ``kind``."""
        if self._journal is not None:
            tracker = RecordingStatusTracker(self._journal.records, spec, received, self._clock, correlation_id)
            tracker.dead_lettered(self._clock.now(), text, kind)

    def _record(
        self, delivery: Delivery, error: BaseException, message: str, reason: str | None, *, ran: bool = True
    ) -> bool:
        if self._journal is None:
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
            correlation_id=delivery.correlation_id,
            ran=ran,
        )
        return self._journal.record_failure(record)

    def _copy_to_dlq(self, record: Mapping[str, Any], reason: DeadLetterReason, keys: dict[str, Any]) -> bool:
        try:
            self._queues.dead_letter(record, reason, self._clock.now())
            return True
        except Exception:
            # The original stays in the queue; the redrive policy moves it to the
            # DLQ once its receive count passes maxReceiveCount.
            log.exception("could not move a message to the DLQ; leaving it for the redrive policy", extra=keys)
            return False


def is_permanent(job: Job, error: BaseException) -> bool:
    """Whether a failure may not be retried: NonRetryableError, or allow_retries() said no."""
    if isinstance(error, NonRetryableError):
        return True
    try:
        return not job.allow_retries()
    except Exception:
        log.exception("allow_retries() raised; retrying")
        return False
