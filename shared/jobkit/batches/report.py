"""A batch's report (``jobkit batch``, the web view, the push endpoint's GET): its counts, whether it
is sealed and ended, the callbacks pushed, and the members it still waits for."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from jobkit.batches.chains import has_next_step, is_next_step, step_batch_id
from jobkit.core.errors import JobKitError
from jobkit.records.batches import CALLBACKS, ENDS, FAILURES, PENDING, BatchRecord, BatchRef, Callback, Member
from jobkit.records.cancellations import when
from jobkit.records.store import Records

#: How many pending members, and failed ones, a report lists.
SHOWN_PENDING = 20


@dataclass(frozen=True)
class BatchReport:
    record: BatchRecord
    pending: list[Member]
    failed: list[tuple[Member, str]] = field(default_factory=list)  # dead-lettered or cancelled, with which

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "id": record.ref.batch_id,
            "domain": record.ref.domain,
            "description": record.description,
            "opened_at": record.opened_at,
            "sealed_at": record.sealed_at,
            "ended": record.complete,
            "counts": record.counts.summary(),
            "callbacks": {
                name: {"type": callback.job_type, "pushed_at": record.fired.get(name), **_next_step(callback)}
                for name in CALLBACKS
                if (callback := getattr(record, name)) is not None
            },
            "pending_members": [{"type": m.job_type, "id": m.job_id} for m in self.pending],
            "failed_members": [{"type": m.job_type, "id": m.job_id, "end": end} for m, end in self.failed],
        }

    @property
    def next_batch(self) -> str | None:
        """The batch of a chain's next step, if this batch is a chain's step that has one."""
        callback = self.record.on_success
        step = _next_step(callback).get("next_step") if callback is not None else None
        return str(step["batch"]) if step else None

    def callbacks(self) -> list[tuple[str, str, float | None, str]]:
        """Each callback: its name, what it pushes, when it was pushed (or None), and why not."""
        record, found = self.record, []
        for name in CALLBACKS:
            callback = getattr(record, name)
            if callback is not None:
                chain = _next_step(callback)
                step = chain.get("next_step")
                what = (
                    f"the next step of chain {step['chain']}, batch {step['batch']}"
                    if step
                    else f"the end of chain {chain['chain']}"
                    if chain
                    else callback.job_type
                )
                found.append((name, what, record.fired.get(name), _why_not(record, name)))
        return found

    def state(self) -> str:
        record = self.record
        if record.complete:
            return "ended"
        if record.sealed_at is None:
            return "open (not sealed: more may be pushed)"
        return f"sealed at {when(record.sealed_at)}, waiting for {record.counts.pending} member(s)"

    def text(self) -> str:
        record, counts = self.record, self.record.counts
        where = f" in domain {record.ref.domain!r}" if record.ref.domain is not None else " without a domain"
        title = f"batch {record.ref.batch_id}{where}" + (f": {record.description}" if record.description else "")
        lines = [
            title,
            f"  {self.state()}",
            f"  {counts.added} member(s): "
            + ", ".join(f"{counts.ends.get(end, 0)} {end.replace('_', '-')}" for end in ENDS)
            + f", {counts.pending} pending",
        ]
        for name, what, fired, why in self.callbacks():
            lines.append(f"  {name} ({what}): " + (f"pushed at {when(fired)}" if fired is not None else why))
        if self.failed:
            lines.append(
                "  failed: " + ", ".join(f"{m.job_type} {m.job_id} ({end.replace('_', '-')})" for m, end in self.failed)
            )
        if self.pending:
            more = counts.pending - len(self.pending)
            lines.append("  waiting for: " + ", ".join(f"{m.job_type} {m.job_id}" for m in self.pending))
            if more > 0:
                lines.append(f"  and {more} more (its dead letters: jobkit dlq list QUEUE)")
        return "\n".join(lines)


def _next_step(callback: Callback) -> dict[str, Any]:
    """A chain step's ``on_success`` (:mod:`jobkit.batches.chains`): which step it pushes (None: the chain's end)."""
    if not is_next_step(callback):
        return {}
    chain, step = str(callback.params.get("chain")), int(callback.params.get("step", 0))
    if not has_next_step(callback):
        return {"chain": chain, "next_step": None}
    return {"chain": chain, "next_step": {"chain": chain, "step": step, "batch": step_batch_id(chain, step)}}


def _why_not(record: BatchRecord, name: str) -> str:
    if not record.complete:
        return "not yet: the batch has not ended"
    if name == "on_success" and record.counts.failures:
        return f"not pushed: {record.counts.failures} member(s) dead-lettered or cancelled (redrive them)"
    if is_next_step(getattr(record, name)):
        return "due, not pushed yet: start the chain again (group.chain with its ID and steps) to push it"
    return "due, not pushed yet: seal the batch again to push it"


def batch_report(records: Records, batch_id: str, domain: str | None) -> BatchReport:
    """The batch's report. Raises :class:`JobKitError` if no batch of that ID was opened in that domain."""
    ref = BatchRef(batch_id, domain)
    record = records.batches.read(ref)
    if record is None:
        where = f"domain {domain!r}" if domain is not None else "no domain"
        raise JobKitError(f"no batch {batch_id!r} in {where}: was it opened in another domain (--domain)?")
    pending = (
        [m for m, _ in islice(records.batches.members(ref, PENDING), SHOWN_PENDING)] if record.counts.pending else []
    )
    failed = (
        list(islice(((m, end) for m, end in records.batches.members(ref) if end in FAILURES), SHOWN_PENDING))
        if record.counts.failures
        else []
    )
    return BatchReport(record, pending, failed)
