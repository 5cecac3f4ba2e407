"""The runner's loop: an SQS event in, one result per record out.

Per record, the runner parses the spec, checks that its queue serves the type
and resolves the class from the declaration; a message that fails any of this
is *poison*: it goes to the DLQ with the reason, alone. Otherwise it becomes a
:class:`Delivery`, and the stages (:mod:`jobkit.runner.stages`) admit it, see
it start and finish, and settle it. A job that failed is retried after a
backoff or dead-lettered with the reason (:mod:`jobkit.runner.failures`).

Nothing here can crash a batch: every record ends with a result. This package
talks to AWS only through injected ports and never imports boto3.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock, SystemClock
from jobkit.core.correlation import correlation_scope
from jobkit.core.errors import JobFailed
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.declaration.config import Declaration
from jobkit.dedup.store import DedupStore
from jobkit.records.journal import AttemptJournal
from jobkit.runner.attempts import Attempts
from jobkit.runner.batch import Entry, roots_first
from jobkit.runner.cancelled import cancelled_before_start, stopped_by_cancel
from jobkit.runner.deadline import TimeBudget
from jobkit.runner.delivery import (
    Delivery,
    LambdaContext,
    MetricsPort,
    QueuePort,
    message_id_of,
)
from jobkit.runner.failures import Failures, is_permanent
from jobkit.runner.intake import Intake
from jobkit.runner.log_level import running
from jobkit.runner.registry import JobRegistry
from jobkit.runner.requeue import Requeue
from jobkit.runner.side_by_side import SideBySide
from jobkit.runner.stage import JOB_ERRORS, LATER, Hooks, Run, Stage, overrides
from jobkit.runner.stages import StageKit, standard_stages

if TYPE_CHECKING:
    from jobkit.jobs.job import QueueGroup
    from jobkit.payloads.store import PayloadStore
    from jobkit.records.store import Records
    from jobkit.runner.direct_line import DirectLine

log = logging.getLogger(__name__)


def _as_learned(entry: Entry, result: RecordResult) -> RecordResult:
    """A record's result with what a stage learned of it at the end of the batch:
    a settle that found the store down, an end its batch could not count."""
    delivery = entry.delivery
    if delivery is not None and delivery.dedup_unavailable and not result.dedup_unavailable:
        result = replace(result, dedup_unavailable=True)
    if delivery is not None and delivery.send_back is not None:
        result = replace(result, send_back=delivery.send_back)
    return result


class Runner:
    """Runs the jobs of SQS batches from one queue.

    Args:
        declaration: the job types this runner knows: its queue's, and those its jobs push.
        queue: the declared queue it serves; a message of any other type is poison.
        queues: SQS operations (backoff, dead-lettering, re-enqueueing).
        records: the jobs table; without it, jobs run without
            de-duplication, flow control or status, and no record is written.
        dedup: admission over ``records`` (default: a store of its own, with
            a root cache of its own).
        group_factory: makes the push SDK that jobs use to push more jobs, per domain.
        metrics: receives one :class:`RecordResult` per record; flushed per batch.
        clock: the time source (tests and the local stack move it).
        registry: resolves job classes (default: from the declaration).
        rng: randomness for backoff jitter.
        stages: the stages (default: :func:`jobkit.runner.stages.standard_stages`).
        payloads: the payload bucket, where the params of large jobs are (:mod:`jobkit.payloads`).
    """

    def __init__(
        self,
        declaration: Declaration,
        *,
        queue: str,
        queues: QueuePort,
        records: Records | None = None,
        dedup: DedupStore | None = None,
        group_factory: Callable[[str | None], QueueGroup] | None = None,
        metrics: MetricsPort | None = None,
        clock: Clock | None = None,
        registry: JobRegistry | None = None,
        rng: random.Random | None = None,
        stages: Sequence[Stage] | None = None,
        payloads: PayloadStore | None = None,
    ) -> None:
        self.declaration = declaration
        self.queue = declaration.queues[queue]
        self._clock = clock or SystemClock()
        registry = registry or JobRegistry(declaration)
        if dedup is not None and records is None:
            raise TypeError("Runner: dedup needs the records it admits over (records=)")
        if records is not None and dedup is None:
            dedup = DedupStore(records, clock=self._clock)
        journal = AttemptJournal(records, clock=self._clock) if records is not None else None
        self._attempts = Attempts(journal)
        self._queues = queues
        self._failures = Failures(self.queue, queues, journal, self._clock, rng or random.Random())
        self._budget = TimeBudget()  # the container's: what its jobs took, to keep a batch in its timeout
        self._hand_back = Requeue(queues, journal, self._failures)
        self._ran_in_batch = self._handing_back = False
        job_types = tuple(declaration.types[name] for name in self.queue.types)
        kit = StageKit(
            self.queue, queues, self._clock, records, dedup, journal, metrics, group_factory, job_types, payloads
        )
        self.stages = list(stages) if stages is not None else standard_stages(kit, self._failures)
        limits = {t.name: t.batch_concurrency for t in job_types}
        self._side_by_side = SideBySide(limits, limited={t.name for t in job_types if t.concurrency is not None})
        self._hooks = Hooks(self.stages)
        #: records in, deliveries out (and params from the payload bucket)
        self.intake = Intake(
            declaration, self.queue, queues, self._failures, self._attempts, registry, self._clock, payloads
        )
        #: where a job's success line goes without the logging machinery (the Lambda wiring sets it)
        self.direct_line: DirectLine | None = None

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
        if self._hooks.stages != self.stages:  # a test or an app may have changed the stages
            self._hooks = Hooks(self.stages)
        self._ran_in_batch = self._handing_back = False
        self._call_each(self._hooks.begin_batch)
        entries = [self._take_safely(record, context) for record in (records if isinstance(records, list) else [])]
        order = roots_first(entries)
        self._admit([entries[i] for i in order])
        # A job's own exits (sys.exit) are failed attempts; what still escapes
        # (KeyboardInterrupt, a crash) ends the invocation unreported, as death would
        finished = self._side_by_side.finish(entries, order, self._finish_safely, fits=self._fits)
        results = [finished[i] for i in range(len(entries))]  # in the batch's own order
        self._call_each(self._hooks.end_batch)
        return [_as_learned(entry, result) for entry, result in zip(entries, results, strict=True)]

    # -- one record ------------------------------------------------------------------

    def _take_safely(self, record: Any, context: LambdaContext | None) -> Entry:
        entry = Entry(record)
        try:
            if type(record) is not dict and not isinstance(record, Mapping):
                raise TypeError(f"an SQS event record is an object, got {type(record).__name__}")
            taken = self.intake.take(record, context)
            if isinstance(taken, RecordResult):
                entry.result = taken
            else:
                entry.delivery = taken
        except Exception as exc:  # a bug in jobkit itself, or a hand-made record: never crash the batch
            entry.result = self._internal_error(record, exc)
        return entry

    def _admit(self, entries: list[Entry]) -> None:
        """Admit the batch's deliveries, stage after stage (see :mod:`jobkit.runner.stage`)."""
        for position, stage in enumerate(self._hooks.admitters):
            waiting = [e for e in entries if e.delivery is not None and e.result is None and e.resume_at is None]
            if not waiting:
                return
            if not overrides(stage, "admit_batch"):
                for entry in waiting:
                    assert entry.delivery is not None
                    try:
                        entry.result = stage.admit(entry.delivery)
                    except Exception as exc:
                        entry.result = self._internal_error(entry.record, exc)
                continue
            try:
                answers = list(stage.admit_batch([e.delivery for e in waiting if e.delivery is not None]))
                if len(answers) != len(waiting):
                    raise RuntimeError(f"{type(stage).__name__} admitted {len(answers)} of {len(waiting)} deliveries")
            except Exception as exc:
                for entry in waiting:
                    entry.result = self._internal_error(entry.record, exc)
                continue
            for entry, answer in zip(waiting, answers, strict=True):
                if answer is LATER:
                    entry.resume_at = position
                elif answer is not None:
                    entry.result = answer

    def _finish_safely(self, entry: Entry, beside: bool = False) -> RecordResult:
        """Run an admitted job (admitting it first if a stage left it for its
        turn), then settle the record, whatever ended it. A job run ``beside``
        others is never handed back: a copy sent while a job beside it may still
        overrun the deadline would run a second time (see :meth:`_fits`)."""
        result, delivery = entry.result, entry.delivery
        if result is None and delivery is not None:
            try:
                result = None if beside else self._out_of_time(delivery)
                if result is None and entry.resume_at is not None:
                    result = self._admit_on_turn(delivery, entry.resume_at)
                if result is None and delivery.cancel_watch is not None:
                    result = cancelled_before_start(delivery)  # (checked again if it waited 5 s or more)
                if result is None:
                    self._ran_in_batch = True
                    result = self._run(delivery)
                    if result.run_time_ms is not None:
                        self._budget.ran(delivery.spec.type, result.run_time_ms / 1000)
            except Exception as exc:
                result = self._internal_error(entry.record, exc)
        assert result is not None, "every record was taken, admitted or run"
        self._call_each(self._hooks.settle, delivery, result)
        return result

    def _fits(self, entry: Entry) -> bool:
        """Whether a job may start beside others: the first of a batch, or one the
        time left fits; one that does not waits for the jobs beside it, and then
        is handed back (or runs) as one job after another would be."""
        assert entry.delivery is not None
        return not self._ran_in_batch or self._budget.fits(entry.delivery)[0]

    def _out_of_time(self, delivery: Delivery) -> RecordResult | None:
        """Hand the job back if it would not finish before the invocation's
        deadline (:mod:`jobkit.runner.deadline`); the first job of a batch always
        runs, and once a job is handed back, so is every job after it (the time
        left only shrinks, and a copy sent is only right if the invocation then
        answers in time). A hand-back that cannot be sent runs the job."""
        if not self._ran_in_batch:
            return None
        if self._handing_back:
            why = "handed back: a job before it in the batch was, for lack of time"
        else:
            fits, left, needs = self._budget.fits(delivery)
            if fits:
                return None
            why = f"handed back: {left:.1f} s left in the invocation, and its type's jobs take up to {needs:.1f} s"
        try:
            self._hand_back.send(delivery, 0)
        except Exception as exc:
            log.warning("could not hand the job back (%s): running it", exc, extra=delivery.keys)
            return None
        self._handing_back = True
        log.info("re-enqueued: %s", why, extra=delivery.keys)
        return delivery.result(Outcome.DEFERRED, reason=why)

    def _admit_on_turn(self, delivery: Delivery, position: int) -> RecordResult | None:
        for stage in self._hooks.admitters[position:]:
            result = stage.admit(delivery)
            if result is not None:
                return result
        return None

    def _internal_error(self, record: Any, exc: Exception) -> RecordResult:
        """A bug in jobkit itself, or a hand-made record: never crash the batch."""
        log.exception("internal error handling message %s", message_id_of(record))
        return self._failures.internal_error(record, exc)

    # -- running ----------------------------------------------------------------------------

    def _run(self, delivery: Delivery) -> RecordResult:
        spec, job = delivery.spec, delivery.job
        assert job is not None, "a stage builds the job before it runs"
        run, keys = Run(started_at=self._clock.now()), delivery.keys
        try:
            self._call_each(self._hooks.start, delivery, run)
            # No line when a job starts: if the invocation times out, the deadline
            # watchdog names the job it was running (one INFO line per job, not two).
            if log.isEnabledFor(logging.DEBUG):
                log.debug("job params", extra={**keys, "attempt": delivery.attempt, "params": spec.params})
            # the job's own lines carry its correlation ID, and the jobs it pushes inherit it
            job_key = (delivery.job_type.name, spec.id)
            with running(delivery.job_type.log_level, job_key), correlation_scope(delivery.correlation_id):
                try:
                    run.succeeded = job.run() is not False
                except JOB_ERRORS as exc:
                    run.error = exc
                finally:
                    try:
                        job.tear_down(run.succeeded)
                    except JOB_ERRORS:
                        log.exception("tear_down failed; the attempt's outcome stands", extra=keys)
        finally:
            run.done()
        run.finished_at = finished_at = self._clock.now()
        cancelled = stopped_by_cancel(delivery, run)
        if cancelled is not None:  # the job saw its cancellation and stopped: no success to record
            run.succeeded, run.error = False, None
        self._call_each(self._hooks.finish, delivery, run)
        fields = {
            "started_at": run.started_at,
            "pickup_delay_ms": max(0.0, run.started_at - (spec.ready_at or run.started_at)) * 1000,
            "root_job_age_ms": (
                max(0.0, run.started_at - spec.root_job_timestamp) * 1000
                if spec.root_job_timestamp is not None
                else None
            ),
            "run_time_ms": (finished_at - run.started_at) * 1000,
            "dedup_unavailable": delivery.dedup_unavailable,
        }
        if cancelled is not None:
            log.info("%s %s cancelled while it ran", spec.type, spec.id, extra={**keys, "reason": cancelled})
            return delivery.result(Outcome.CANCELLED, reason=cancelled, **fields)
        if run.succeeded:
            extra = {**keys, "run_time_ms": round((finished_at - run.started_at) * 1000, 2)}
            if self.direct_line is not None:  # (the same line, without logging's machinery while it can)
                self.direct_line.info(f"{spec.type} {spec.id} succeeded", extra)
            else:
                log.info("%s %s succeeded", spec.type, spec.id, extra=extra)
            return delivery.result(Outcome.SUCCEEDED, **fields)
        error = run.error or JobFailed(f"{type(job).__name__}.run() returned False")
        return self._failures.fail(delivery, error, job, permanent=is_permanent(job, error), fields=fields)

    @staticmethod
    def _call_each(hooks: list[Callable[..., None]], *args: Any) -> None:
        """Stage hooks other than admit, in turn: what one fails to do never
        fails the batch, nor the job, nor the other stages' hooks."""
        for hook in hooks:
            try:
                hook(*args)
            except Exception:
                log.exception("runner stage %s failed", getattr(hook, "__qualname__", hook))
