"""Batches as an app uses them, and their callbacks.

::

    with group.batch(on_complete=JobSpecification("editReached", {"edit": 5})) as batch:
        batch.push(specs)          # counted in, then sent
    # leaving the block seals it: on_complete is pushed once every member has ended

A batch's callbacks are pushed by whoever sees it end: the runner that
counts its last member's end, or :meth:`Batch.seal` when every member had
ended before it. Each push is claimed first (:meth:`Batches.claim`), for
as long as the pusher may live (a runner's function timeout), and marked
pushed after: two that see the end at once push once, and a pusher that
dies between the claim and the push leaves the callback to the next that
looks once its claim has expired (a redelivery of its batch, another seal).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from types import TracebackType

from jobkit.batches.chains import advance, is_next_step
from jobkit.core.clock import Clock
from jobkit.core.errors import BatchError, JobQueueError
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration
from jobkit.records import BATCH_RECORD_TTL_S
from jobkit.records.batches import ENDS, BatchRecord, BatchRef, Callback, Counts, clean_description
from jobkit.records.store import Records

log = logging.getLogger(__name__)

#: How long an app's claim on a callback lasts: a seal that dies between its
#: claim and its push leaves the callback to a seal called again after it.
APP_CLAIM_S = 60.0
#: The namespace of callbacks' job IDs: one per batch, domain and callback.
_CALLBACK_NAMESPACE = uuid.UUID("0d7e5c52-3f64-4a0e-8f7b-8a1d9b6c2e41")
#: The param a callback's summary of its batch is in.
SUMMARY_PARAM = "batch"
#: A callback's params, as JSON, at most: the batch's item holds both, within DynamoDB's 400 KB.
MAX_CALLBACK_BYTES = 150_000


class BatchKeeper:
    """Opens, seals and reads batches, and pushes their callbacks when they end."""

    def __init__(
        self,
        records: Records,
        clock: Clock,
        push: Callable[[list[JobSpecification]], object],
        *,
        declaration: Declaration | None = None,
        claim_s: float = APP_CLAIM_S,
    ) -> None:
        self._declaration = declaration
        self._records = records
        self._clock = clock
        self._push = push
        self._claim_s = claim_s

    def open(
        self,
        ref: BatchRef,
        on_complete: JobSpecification | None,
        on_success: JobSpecification | None,
        description: str,
        lane: str | None = None,
    ) -> float | None:
        """Record the batch (or find it, opened with the same callbacks). Returns when it was sealed, if it was.
        ``lane``: the priority lane of the job that opens it, where its callbacks go unless they name one."""
        complete, success = (
            self._callback("on_complete", on_complete, ref),
            self._callback("on_success", on_success, ref),
        )
        now = self._clock.now()
        expires_at = int(now) + BATCH_RECORD_TTL_S
        return self._records.batches.open(ref, complete, success, description, now, expires_at, lane)

    def now(self) -> float:
        return self._clock.now()

    def open_step(self, ref: BatchRef, rest: Callback, description: str, lane: str | None = None) -> float | None:
        """Open a chain step's batch (:mod:`jobkit.batches.chains`), whose ``on_success`` is the rest of the chain."""
        now = self._clock.now()
        return self._records.batches.open(ref, None, rest, description, now, int(now) + BATCH_RECORD_TTL_S, lane)

    def in_lane(self, lane: str | None, spec: JobSpecification) -> JobSpecification:
        """A callback or chain step's job as its batch pushes it: in the lane it
        names, else in ``lane`` (its batch's opener's) if its queue has it. A lane
        its queue no longer has (removed since) is its queue's own, said in a warning."""
        declaration = self._declaration
        if declaration is None or spec.type not in declaration.types:
            return spec
        queue = declaration.queues[declaration.types[spec.type].queue]
        if spec.priority is not None and queue.lane(spec.priority) is None:
            log.warning("%s: lane %r is gone from queue %s: pushed to its own", spec.type, spec.priority, queue.name)
            return spec.replace(priority=None)
        return spec if spec.priority is not None or lane is None else queue.in_lane(lane, spec)

    def seal(self, ref: BatchRef) -> BatchRecord:
        """Seal the batch, and push its callbacks if every member had ended already."""
        self._records.batches.seal(ref, self._clock.now())
        self.push_due(ref)
        record = self._records.batches.read(ref)
        assert record is not None, "sealed after it was opened"
        return record

    def read(self, ref: BatchRef) -> BatchRecord | None:
        return self._records.batches.read(ref)

    def push_due(self, ref: BatchRef, *, strict: bool = False) -> list[str]:
        """Push the callbacks the batch's counts call for now, each once. Returns those pushed.

        Raises:
            TableUnavailable, JobQueueError: a callback could not be claimed or
                pushed (its claim is given back): the caller tries again later.
            BatchError: (``strict`` only) a chain's next step refused as it
                stands, its batch ID taken, say; otherwise logged, and left due.
        """
        batches = self._records.batches
        record = batches.read(ref)
        if record is None or not record.due():
            return []
        # that it ended is decided on a snapshot: counts read one by one may have missed a child
        # counted in before its parent's end that they saw
        record = batches.read(ref, snapshot=True)
        pushed: list[str] = []
        for name in record.due() if record is not None else []:
            assert record is not None
            owner, now = str(uuid.uuid4()), self._clock.now()
            if not batches.claim(ref, name, owner, now, now + self._claim_s):
                continue  # pushed, or being pushed, by another
            try:
                self._fire(record, name)
            except BatchError as refused:  # a chain's next step, refused as it stands (its batch ID taken...)
                batches.release(ref, name, owner)
                if strict:  # the app that starts the chain again hears why
                    raise
                log.error(
                    "batch %s: its chain cannot go on until this is fixed and the chain started again: %s",
                    ref.batch_id,
                    refused,
                )
                continue
            except JobQueueError as refused:
                if not _permanent(refused):
                    batches.release(ref, name, owner)
                    raise
                # it could never be pushed (its params break a schema deployed since): said, not tried again
                what = "next step" if is_next_step(getattr(record, name)) else name
                log.error("batch %s: its %s cannot be pushed, and never will: %s", ref.batch_id, what, refused)
            except Exception:
                batches.release(ref, name, owner)
                raise
            batches.fired(ref, name, owner, self._clock.now())
            pushed.append(name)
        return pushed

    def _fire(self, record: BatchRecord, name: str) -> None:
        callback = getattr(record, name)
        if is_next_step(callback):  # a chain's step succeeded: its next one
            advance(self, self._records, self._push, record, callback)
        else:
            self._push([self.in_lane(record.lane, callback_spec(record, name))])

    def _callback(self, name: str, spec: JobSpecification | None, ref: BatchRef) -> Callback | None:
        if spec is None:
            return None
        if not isinstance(spec, JobSpecification):
            raise TypeError(f"{name} takes a JobSpecification, got {type(spec).__name__}")
        if self._declaration is None or not self._declaration.job_type(spec.type).batch_callback:
            raise BatchError(
                f"{name}: {spec.type} cannot be a batch's callback: declare batch_callback = true in"
                f" [types.{spec.type}] and deploy (the runners of batch members may then push it)"
            )
        if spec.domain not in (None, ref.domain):
            raise BatchError(
                f"{name}: a callback is pushed in its batch's domain ({ref.domain!r}), not {spec.domain!r}"
            )
        if SUMMARY_PARAM in spec.params:
            raise BatchError(f"{name}: the param {SUMMARY_PARAM!r} is the batch's summary, which jobkit fills in")
        if not spec.id_generated or spec.release_at is not None or spec.delay is not None or spec.extra_fields:
            raise BatchError(
                f"{name}: a callback is pushed when its batch ends, with an ID derived from the batch: give it"
                " a type and params only (no id, delay, release time or extra fields)"
            )
        self._declaration.lane(spec.type, spec.priority)  # a lane its queue lacks: refused now, as at push
        callback = Callback(spec.type, spec.params, spec.priority)
        # refused now what its push would refuse then: half root params, params its schema does not take
        placeholder = callback_spec(_ended(ref, name, callback), name).stamped(self._clock.now())
        self._declaration.job_type(spec.type).check_job(placeholder, self._clock.now())
        if len(callback.stored().encode()) > MAX_CALLBACK_BYTES:
            raise BatchError(
                f"{name}: its params are {len(callback.stored().encode()):,} bytes of JSON, over the"
                f" {MAX_CALLBACK_BYTES:,} a callback may have (the batch's record holds both callbacks):"
                " pass a reference instead"
            )
        return callback


def _permanent(refused: JobQueueError) -> bool:
    """Whether a push was refused for what the job is, not for an outage."""
    return all(f.code in ("SpecError", "InvalidParams", "UnknownJobType") for f in refused.failed)


def _ended(ref: BatchRef, name: str, callback: Callback) -> BatchRecord:
    """A batch that ended with ``callback`` as ``name``: what a callback spec is checked on when it is opened."""
    return BatchRecord(ref, "", callback, callback, None, 0.0, {}, Counts(0, dict.fromkeys(ENDS, 0)))


def callback_spec(record: BatchRecord, name: str) -> JobSpecification:
    """The callback ``name`` of a batch that ended: its params, and the batch's summary."""
    callback = getattr(record, name)
    ref = record.ref
    summary = {"id": ref.batch_id, "callback": name, "description": record.description, **record.counts.summary()}
    job_id = uuid.uuid5(_CALLBACK_NAMESPACE, "\x00".join((ref.domain or "", ref.batch_id, name)))
    return JobSpecification(
        callback.job_type,
        {**callback.params, SUMMARY_PARAM: summary},
        domain=ref.domain,
        id=str(job_id),
        priority=callback.priority,
    )


def end_of(result: RecordResult) -> str | None:
    """The end a result gives a member: one of :data:`ENDS`, or None (not over yet)."""
    if not result.outcome.is_final:
        return None
    if result.outcome is Outcome.REDELIVERED:  # a copy of a push that ended before (ran to success)
        return "succeeded"
    if result.outcome is Outcome.POISONED:  # its class or params do not fit (since a deploy): dead-lettered
        return "dead_lettered"
    status = result.status
    return status if status in ENDS else None


class Batch:
    """A batch an app pushes to: ``push`` counts jobs in and sends them,
    ``seal`` (or leaving a ``with`` block without an exception) says no more
    will come from outside it. The jobs its members push join it however
    long after the seal."""

    def __init__(
        self, keeper: BatchKeeper, ref: BatchRef, push: Callable[[list[JobSpecification]], list[str]], sealed: bool
    ) -> None:
        self._keeper = keeper
        self._ref = ref
        self._push = push
        self._sealed = sealed

    @property
    def id(self) -> str:
        return self._ref.batch_id

    @property
    def domain(self) -> str | None:
        return self._ref.domain

    def push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[str]:
        """Push jobs into the batch (see :meth:`jobkit.JobQueueGroup.push`).

        Raises:
            BatchError: the batch is sealed; a job of another batch or domain,
                or of a type that does not declare ``batches``.
        """
        if self._sealed:
            raise BatchError(f"batch {self.id!r} is sealed: it takes no more pushes but its members' own")
        specs = [jobs] if isinstance(jobs, JobSpecification) else list(jobs)
        for spec in specs:
            if not isinstance(spec, JobSpecification):
                raise TypeError(f"push() takes JobSpecification objects, got {type(spec).__name__}")
            if spec.batch not in (None, self.id) or spec.domain not in (None, self.domain):
                raise BatchError(
                    f"{spec.type} {spec.id}: of batch {spec.batch!r} in domain {spec.domain!r}; this batch is"
                    f" {self.id!r} in {self.domain!r}"
                )
        return self._push([spec.replace(batch=self.id) for spec in specs])

    def seal(self) -> BatchRecord:
        """No more pushes from outside: the batch ends once its members have.
        Pushes its callbacks if they had all ended already. Calling it again is
        harmless, and pushes a callback a seal that died left unpushed."""
        record = self._keeper.seal(self._ref)
        self._sealed = True
        return record

    def status(self) -> BatchRecord:
        record = self._keeper.read(self._ref)
        assert record is not None, "read after it was opened"
        return record

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:  # a block that raised leaves the batch open: seal() it when its pushes are all done
            self.seal()


class BatchMethods:
    """``batch`` and ``batch_status`` for a push group, in its domain
    (:class:`jobkit.push.JobQueueGroup` has them)."""

    domain: str | None

    def _batch_keeper(self) -> BatchKeeper:
        raise NotImplementedError

    def push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[str]:
        raise NotImplementedError

    @property
    def pushing_lane(self) -> str | None:
        raise NotImplementedError

    def batch(
        self,
        *,
        on_complete: JobSpecification | None = None,
        on_success: JobSpecification | None = None,
        description: str = "",
        id: str | None = None,  # noqa: A002 - the batch's, as a job's
    ) -> Batch:
        """Open a batch in this domain (or, with ``id``, open one again to push
        more into it from another request: its callbacks must be the same).

        ``on_complete`` is pushed once, when every member has ended, whatever
        their outcomes; ``on_success`` once, if none was dead-lettered or
        cancelled (possibly later: when a redriven member that failed succeeds).

        Raises:
            BatchError: a callback of a type that does not declare
                ``batch_callback``; ``id`` opened before with other callbacks,
                or sealed already.
            TableUnavailable: the jobs table could not record it.
        """
        ref = BatchRef(_batch_id(id), self.domain)
        keeper = self._batch_keeper()
        # a batch a job opens: its callbacks go to that job's lane, as the jobs it pushes (unless they name one)
        sealed = keeper.open(ref, on_complete, on_success, clean_description(description), self.pushing_lane)
        if sealed is not None and id is not None:
            raise BatchError(f"batch {ref.batch_id!r} is sealed: it takes no more pushes but its members' own")
        return Batch(keeper, ref, self.push, sealed is not None)

    def batch_status(self, batch_id: str) -> BatchRecord | None:
        """A batch of this domain: its counts (total, pending, each end), whether
        it is sealed, and which callbacks were pushed; None if never opened."""
        return self._batch_keeper().read(BatchRef(_batch_id(batch_id), self.domain))


def _batch_id(value: str | None) -> str:
    from jobkit.core.wire import ID_PATTERN

    if value is None:
        return str(uuid.uuid4())
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise BatchError(f"a batch ID must match {ID_PATTERN.pattern}, got {value!r}")
    return value
