"""Chains: jobs, or batches of jobs, run one step after another.

::

    group.chain([
        JobSpecification("renderPages", {"edit": 5}),          # step 1: one job (and every job it pushes)
        [JobSpecification("purge", {"region": r}) for r in regions],   # step 2: a batch of jobs
        JobSpecification("announce", {"edit": 5}),             # step 3, after step 2's batch succeeded
    ])

Each step is a batch (:mod:`jobkit.batches.control`) with the ID
``{chain}-{step}``. Its ``on_success`` is the rest of the chain: when every
job of the step (and every job they pushed) has succeeded or been skipped,
whoever counts the step's last end opens the next step's batch, pushes its
jobs and seals it, under the batch's callback claim, so it happens once. A
step with a dead-lettered or cancelled job stops the chain there; redriving
the job and seeing it succeed continues it, as a batch's ``on_success``
fires then.

A step's jobs get IDs derived from the chain, the step and their place in it.
A step's push that a fault interrupted is done again with the same IDs; the
types of every step but the first are ``batch_callback`` types, delivered
once, so a job pushed twice runs once.

What a step leaves the next (``self.context.previous_result``): its job's
result, if the step is one job of a ``track_status`` type; otherwise (several
jobs, or one that keeps no status, such as a root that fans out) its batch's
summary (counts per end, the jobs it pushed included).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from jobkit.core.chain_link import MAX_STEPS, ChainLink
from jobkit.core.errors import BatchError
from jobkit.core.spec import JobSpecification, canonical_json
from jobkit.core.wire import ID_PATTERN
from jobkit.records.batches import BatchRecord, BatchRef, Callback, clean_description

if TYPE_CHECKING:
    from jobkit.declaration.config import Declaration
    from jobkit.records.store import Records

#: The ``on_success`` of a chain step's batch: the rest of the chain (no job type: the type pattern refuses it).
NEXT_STEP = "jobkit:nextStep"
#: A chain's ID is at most this long: its steps' batch IDs add ``-{step}``.
MAX_CHAIN_ID = 80 - 1 - len(str(MAX_STEPS))
#: The steps still to come, as JSON, at most: the step's batch record holds them (within DynamoDB's 400 KB).
MAX_STEPS_BYTES = 150_000
_STEP_NAMESPACE = uuid.UUID("6b1f0a4e-52c9-4d6e-9d3a-2f7e8c1b5a90")

Step = JobSpecification | Sequence[JobSpecification]


class BatchKeeper(Protocol):
    """What a chain needs of :class:`jobkit.batches.control.BatchKeeper`."""

    def open_step(self, ref: BatchRef, rest: Callback, description: str, lane: str | None = None) -> float | None: ...
    def in_lane(self, lane: str | None, spec: JobSpecification) -> JobSpecification: ...
    def seal(self, ref: BatchRef) -> BatchRecord: ...
    def read(self, ref: BatchRef) -> BatchRecord | None: ...
    def push_due(self, ref: BatchRef, *, strict: bool = False) -> list[str]: ...
    def now(self) -> float: ...


@dataclass(frozen=True)
class Chain:
    """A chain an app started: its ID, domain and number of steps."""

    id: str
    domain: str | None
    steps: int

    def batch_id(self, step: int) -> str:
        """The batch ID of step ``step`` (1 for the first): ``jobkit batch`` shows it."""
        return step_batch_id(self.id, step)


def step_batch_id(chain_id: str, step: int) -> str:
    return f"{chain_id}-{step}"


def step_job_id(domain: str | None, chain_id: str, step: int, index: int) -> str:
    return str(uuid.uuid5(_STEP_NAMESPACE, "\x00".join((domain or "", chain_id, str(step), str(index)))))


def start(
    keeper: BatchKeeper,
    declaration: Declaration,
    push: Any,
    domain: str | None,
    steps: Sequence[Step],
    chain_id: str | None,
    description: str,
    now: float,
    lane: str | None = None,
) -> Chain:
    """Open the chain's first step, push its jobs and seal it (see :meth:`ChainMethods.chain`);
    ``lane``, the starting job's, is where its steps' jobs go unless they name one."""
    chain_id = _chain_id(chain_id)
    stored = [_stored_step(declaration, domain, chain_id, n, step, now) for n, step in enumerate(steps, 1)]
    if not stored:
        raise BatchError("a chain has at least one step")
    if len(stored) > MAX_STEPS:
        raise BatchError(f"a chain has at most {MAX_STEPS} steps, got {len(stored)}")
    rest = _rest(chain_id, 2, stored[1:], stored[0], description)
    if len(rest.stored().encode()) > MAX_STEPS_BYTES:
        raise BatchError(
            f"chain {chain_id}: its steps after the first are {len(rest.stored().encode()):,} bytes of JSON, over"
            f" the {MAX_STEPS_BYTES:,} a chain's record may hold: pass references in params instead"
        )
    ref = BatchRef(step_batch_id(chain_id, 1), domain)
    if not _push_step(keeper, push, ref, ChainLink(chain_id, 1), stored[0], rest, description, lane):
        # started before: push a next step that is due and not pushed (its push failed, and no retry came)
        for step in range(2, len(stored) + 1):
            keeper.push_due(BatchRef(step_batch_id(chain_id, step - 1), domain), strict=True)
            if keeper.read(BatchRef(step_batch_id(chain_id, step), domain)) is None:
                break
    return Chain(chain_id, domain, len(stored))


def advance(keeper: BatchKeeper, records: Records, push: Any, record: BatchRecord, callback: Callback) -> None:
    """Push the next step of a chain whose step ``record`` succeeded: its
    ``on_success`` is ``callback``, the rest of the chain. Done again after a
    fault, it pushes the same jobs (with the same IDs), and none once sealed."""
    params = callback.params
    chain_id, step, steps = str(params["chain"]), int(params["step"]), list(params["steps"])
    if not steps:
        return  # the chain's last step succeeded: its end
    link = ChainLink(chain_id, step, _previous_result(records, record, params.get("after")))
    description = str(params.get("description", ""))
    rest = _rest(chain_id, step + 1, steps[1:], steps[0], description)
    ref = BatchRef(step_batch_id(chain_id, step), record.ref.domain)
    _push_step(keeper, push, ref, link, steps[0], rest, description, record.lane)  # in the chain's lane


def is_next_step(callback: Callback | None) -> bool:
    """Whether a batch's callback is a chain's continuation (its next step, or its end)."""
    return callback is not None and callback.job_type == NEXT_STEP


def has_next_step(callback: Callback | None) -> bool:
    """Whether a batch's callback is a chain's next step (not its end)."""
    return is_next_step(callback) and bool(callback.params.get("steps")) if callback is not None else False


def _push_step(
    keeper: BatchKeeper,
    push: Any,
    ref: BatchRef,
    link: ChainLink,
    jobs: list[dict[str, Any]],
    rest: Callback,
    description: str,
    lane: str | None,
) -> bool:
    """Open the step's batch, push its jobs and seal it; False if it was sealed (pushed before).
    ``lane`` is the chain's (its starting job's): its steps' batches keep it, for the steps after.

    Raises:
        BatchConflict: a batch of the step's ID was opened otherwise (not this chain's step).
    """
    if keeper.open_step(ref, rest, description, lane) is not None:
        return False
    specs = [
        keeper.in_lane(
            lane,
            JobSpecification(
                job["type"],
                job["params"],
                domain=ref.domain,
                id=step_job_id(ref.domain, link.chain_id, link.step, n),
                batch=ref.batch_id,
                chain=link,
                priority=job.get("priority"),
            ),
        )
        for n, job in enumerate(jobs)
    ]
    try:
        push(specs)
    except BatchError:
        # sealed meanwhile: another start of the chain pushed the step (its jobs, with the same IDs)
        record = keeper.read(ref)
        if record is None or record.sealed_at is None:
            raise
        return False
    keeper.seal(ref)
    return True


def _rest(
    chain_id: str, step: int, steps: list[list[dict[str, Any]]], before: list[dict[str, Any]], description: str
) -> Callback:
    """The ``on_success`` of the step before ``step``: the steps from ``step`` on
    (none after the last step: the chain's end). It names the chain and holds a
    digest of the step's own jobs, so the step's batch is this chain's: a batch
    of that ID opened otherwise, or a chain started again with other steps, has
    other callbacks, and is refused (:class:`BatchConflict`)."""
    after = [before[0]["type"], before[0]["id"]] if len(before) == 1 and before[0].get("tracked") else None
    jobs = hashlib.sha256(canonical_json(before).encode()).hexdigest()[:32]
    params = {"chain": chain_id, "step": step, "steps": steps, "after": after, "description": description, "jobs": jobs}
    return Callback(NEXT_STEP, params)


def _previous_result(records: Records, record: BatchRecord, after: Any) -> Any:
    """The step's one tracked job's result (None if it set none), or its batch's summary."""
    if after is None:
        return {"id": record.ref.batch_id, **record.counts.summary()}
    from jobkit.records.keys import JobRef

    status = records.status_of(JobRef(str(after[0]), record.ref.domain, str(after[1])))
    if status is None or status.result is None:
        return None
    try:
        return json.loads(status.result)
    except ValueError:
        return None


def _stored_step(
    declaration: Declaration, domain: str | None, chain_id: str, step: int, value: Step, now: float
) -> list[dict[str, Any]]:
    """A step as its batch's record keeps it until it is pushed: each job's type, params and ID."""
    jobs = [value] if isinstance(value, JobSpecification) else list(value) if _sequence(value) else None
    if not jobs:
        raise BatchError(f"step {step}: a JobSpecification, or a non-empty list of them, got {value!r:.80}")
    stored = []
    for n, spec in enumerate(jobs):
        if not isinstance(spec, JobSpecification):
            raise TypeError(f"step {step}: chain() takes JobSpecification objects, got {type(spec).__name__}")
        _check_step_job(declaration, domain, step, spec)
        job_id = step_job_id(domain, chain_id, step, n)
        placeholder = JobSpecification(
            spec.type,
            spec.params,
            domain=domain,
            id=job_id,
            batch=step_batch_id(chain_id, step),
            chain=ChainLink(chain_id, step),
        )
        declaration.job_type(spec.type).check_job(placeholder.stamped(now), now)
        tracked = declaration.job_type(spec.type).track_status
        job = {"type": spec.type, "params": spec.params, "id": job_id, "tracked": tracked}
        if spec.priority is not None:  # (kept only when set: a step without one is stored as before)
            declaration.lane(spec.type, spec.priority)  # a lane its queue lacks: refused now, as at push
            job["priority"] = spec.priority
        stored.append(job)
    return stored


def _check_step_job(declaration: Declaration, domain: str | None, step: int, spec: JobSpecification) -> None:
    declared = declaration.job_type(spec.type)  # UnknownJobType
    where = f"step {step}: {spec.type}"
    if not declared.batches:
        raise BatchError(
            f"{where}: a chain's steps are batches: declare batches = true in [types.{spec.type}] and deploy"
        )
    if step > 1 and not declared.batch_callback:
        raise BatchError(
            f"{where}: a step after the first is pushed when the step before ends, by the runner that counts"
            f" its end: declare batch_callback = true in [types.{spec.type}] (its jobs are then delivered once)"
        )
    if spec.domain not in (None, domain):
        raise BatchError(f"{where}: a chain's jobs are pushed in its domain ({domain!r}), not {spec.domain!r}")
    if (
        not spec.id_generated
        or spec.release_at is not None
        or spec.delay is not None
        or spec.extra_fields
        or spec.batch is not None
        or spec.remove_duplicates
    ):
        raise BatchError(
            f"{where}: a chain's job is pushed with an ID derived from the chain, in its step's batch: give it a"
            " type and params only (no id, delay, release time, batch, remove_duplicates or extra fields)"
        )


def _sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _chain_id(value: str | None) -> str:
    if value is None:
        return str(uuid.uuid4())
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value) or len(value) > MAX_CHAIN_ID:
        raise BatchError(
            f"a chain ID must match {ID_PATTERN.pattern} and be at most {MAX_CHAIN_ID} long, got {value!r}"
        )
    return value


class ChainMethods:
    """``chain`` and ``chain_status`` for a push group, in its domain
    (:class:`jobkit.push.JobQueueGroup` has them)."""

    domain: str | None

    def _batch_keeper(self) -> BatchKeeper:
        raise NotImplementedError

    @property
    def declaration(self) -> Declaration:
        raise NotImplementedError

    @property
    def pushing_lane(self) -> str | None:
        raise NotImplementedError

    def push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[str]:
        raise NotImplementedError

    def chain(self, steps: Sequence[Step], *, id: str | None = None, description: str = "") -> Chain:  # noqa: A002
        """Run ``steps`` one after another: push the first now, and each next one
        when every job of the step before (and every job those pushed) has
        succeeded or been skipped. A step is a JobSpecification or a list of
        them (a batch). A dead-lettered or cancelled job stops the chain at its
        step; redriven, and succeeding, it continues it.

        Every step's types declare ``batches``; those of every step but the
        first ``batch_callback`` too. ``id`` names the chain (a new UUID if not
        given): starting it again with the same ID and steps pushes nothing new.

        Raises:
            BatchError: a step of the wrong shape, a type that does not declare
                what it needs, a job with an ID or options of its own; ``id``
                started before with other steps.
            UnknownJobType, InvalidParams, SpecError: a job that could never run.
            TableUnavailable: the jobs table could not record it.
        """
        keeper = self._batch_keeper()
        now = keeper.now()
        description = clean_description(description)  # (a job's chain: its steps in its lane)
        return start(keeper, self.declaration, self.push, self.domain, steps, id, description, now, self.pushing_lane)

    def chain_status(self, chain_id: str) -> list[BatchRecord]:
        """The batches of the chain's steps reached so far, first step first
        (empty if it was never started). A step whose batch ended with no
        failures, and whose ``on_success`` was pushed, has its next step after it."""
        keeper = self._batch_keeper()
        found: list[BatchRecord] = []
        for step in range(1, MAX_STEPS + 1):
            record = keeper.read(BatchRef(step_batch_id(_chain_id(chain_id), step), self.domain))
            if record is None:
                break
            found.append(record)
            if not has_next_step(record.on_success):
                break
        return found
