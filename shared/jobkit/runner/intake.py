"""Taking a record: an SQS record in, the delivery of a job this runner serves
out, or the record's result if it is poison (not a job), a canary `jobkit
verify` gave up on, or a job whose params cannot be had now.

A body whose params are in the payload bucket (wire version 3,
:mod:`jobkit.payloads`) is resolved here, after its type is known to be one
this runner serves and before anything reads its params: the params' schema,
the root job's supersession (the batch's order), de-duplication, the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock
from jobkit.core.errors import JobClassError, SpecError, UnknownJobType
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import decode, is_reference
from jobkit.declaration.config import Declaration, JobType
from jobkit.declaration.params_schema import InvalidParams
from jobkit.jobs.batch_check import BATCH_CHECK_TYPE, check_type
from jobkit.jobs.canary import CANARY_TYPE, canary_type, expired
from jobkit.runner.attempts import Attempts
from jobkit.runner.delivery import Delivery, LambdaContext, QueuePort, check_size, message_id_of, receive_count
from jobkit.runner.failures import Failures
from jobkit.runner.registry import JobRegistry
from jobkit.sqs.first_seen import enqueued_at, first_seen_at, pushed_at

if TYPE_CHECKING:
    from jobkit.declaration.queues import QueueConfig
    from jobkit.payloads.reference import ParamsRef
    from jobkit.payloads.store import PayloadStore


class Intake:
    """Turns the records of one queue into deliveries (see :meth:`take`).

    Args:
        declaration: the types this runner knows (its queue's, and those its jobs push).
        queue: the queue it serves: a message of any other type is poison.
        payloads: the payload bucket, for bodies whose params are there; without
            it such a body is poison (this runner cannot read its params).
    """

    def __init__(
        self,
        declaration: Declaration,
        queue: QueueConfig,
        queues: QueuePort,
        failures: Failures,
        attempts: Attempts,
        registry: JobRegistry,
        clock: Clock,
        payloads: PayloadStore | None = None,
    ) -> None:
        self.declaration, self.queue = declaration, queue
        self._queues, self._failures, self._attempts = queues, failures, attempts
        self._registry, self._clock, self.payloads = registry, clock, payloads
        self._canary = canary_type(queue)
        batched = any(declaration.types[name].batches for name in queue.types)
        self.batch_check = check_type(queue) if batched else None  # served with the batch stage

    def take(self, record: Mapping[str, Any], context: LambdaContext | None) -> Delivery | RecordResult:
        """The record as a delivery of a job this runner serves, or its result."""
        ref = None
        try:
            check_size(record)
            data = decode(record["body"])
            if is_reference(data):  # its params in the payload bucket: the rest of the body is checked first
                from jobkit.payloads.reference import reference_of, resolved

                ref = reference_of(data)
                data = resolved(data, {})
            spec = JobSpecification.from_dict(data)
            spec.check_times(self._clock.now())
            # once queued, its lane is the queue it is in (the spec is this record's own: set, not copied)
            spec.priority = self._queues.priority(record)
            job_type = self.served_type(spec.type)
        except SpecError as exc:
            return self._failures.poison(record, exc)
        if ref is not None:
            unfetched = self._fetch(record, spec, job_type, ref)
            if unfetched is not None:
                return unfetched
        if spec.type == CANARY_TYPE and expired(spec.params, self._clock.now()):  # `jobkit verify` gave up on it
            return RecordResult(
                message_id_of(record),
                CANARY_TYPE,
                Outcome.SUPERSEDED,
                job_id=spec.id,
                domain=spec.domain,
                reason="an expired canary of jobkit verify: dropped unrun",
            )
        try:
            job_type.check_params(spec.id, spec.params)  # a mismatch would fail every attempt
            job_class = self._registry.resolve(spec.type)
        except (InvalidParams, JobClassError) as exc:
            return self._failures.poison(record, exc, spec, tracked=job_type.track_status)
        received = receive_count(record)
        # when it was pushed: SQS's time for its first message, whatever copy this is
        seen, stamped = first_seen_at(record), spec.enqueued_at
        ordered_at, taken_at = pushed_at(stamped, seen), enqueued_at(stamped, seen)
        spec.enqueued_at = taken_at
        before, recounted = self._attempts.before(record, spec.type)
        return Delivery(
            record,
            spec,
            job_type,
            job_class,
            before + received,
            received,
            context=context,
            seen_at=seen,
            pushed_at=ordered_at,
            stamped_at=stamped,
            recounted=recounted,
            params_ref=ref,
        )

    def _fetch(
        self, record: Mapping[str, Any], spec: JobSpecification, job_type: JobType, ref: ParamsRef
    ) -> RecordResult | None:
        """Put a job's params, from the payload bucket and checked as a body's
        would be, into its spec; or the record's result if they cannot be had.
        (:mod:`jobkit.payloads` is imported by a runner that meets such a job:
        the others' cold start does not pay for it.)"""
        from jobkit.payloads.reference import params_from
        from jobkit.payloads.store import PayloadEnded, PayloadUnavailable

        try:
            if self.payloads is None:
                raise SpecError(
                    "its params are in the payload bucket, and this runner has none ($JOBKIT_PAYLOAD_BUCKET):"
                    " deploy a stack whose template has the bucket (`jobkit template`), then redrive"
                )
            spec.params = params_from(self.payloads.get(ref), ref)
            spec.check_times(self._clock.now())  # (its root timestamp, if any, was in the params)
        except SpecError as exc:  # missing, altered, not a job's params: it is the job's end, with the reason
            return self._failures.poison(record, exc, spec, tracked=job_type.track_status)
        except PayloadUnavailable as exc:
            return self._failures.unavailable(record, spec, job_type, exc)
        except PayloadEnded as exc:  # a late copy (a lost delete, SQS's at-least-once) of a job that ended
            # (its batch counts it again: a no-op once counted, and a check of the batch's callbacks)
            return RecordResult(
                message_id_of(record),
                spec.type,
                Outcome.REDELIVERED,
                job_id=spec.id,
                domain=spec.domain,
                reason=str(exc),
                batch=spec.batch,
            )
        return None

    def served_type(self, name: str) -> JobType:
        """The declared type of a message's ``type``, if this runner serves it."""
        if name == CANARY_TYPE:  # every runner serves `jobkit verify`'s canary, on its own queue
            return self._canary
        if name == BATCH_CHECK_TYPE and self.batch_check is not None:  # what it sends itself
            return self.batch_check
        if name not in self.queue.types:
            served = f"queue {self.queue.name!r} serves {', '.join(self.queue.types)}"
            if name in self.declaration.types:  # a type this runner's jobs push
                other = self.declaration.types[name].queue
                problem = f"it is a type of queue {other!r}, not of this runner's ({served})"
            else:
                problem = f"not a type of this runner's queue ({served})"
            raise UnknownJobType(name, problem)
        return self.declaration.types[name]
