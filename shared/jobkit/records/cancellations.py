"""Cancellations: jobs of a ``cancellable`` type that must not run.

Three kinds of item, all under the type's ``cancel`` kind (:mod:`jobkit.records.keys`),
which producers and operators write and a runner only reads:

- **a job's record**, ``{type}#cancel#{job id}`` with the domain as its sort
  key: its newest cancellation (``at``, the canceller's clock, and ``by``;
  ``at`` only moves forward), which covers the pushes of that ID enqueued at
  or before ``at`` (an ID pushed again after it is another job, and runs);
  and ``lifted_at``, the newest time an operator took a cancellation of one
  of its pushes back.
- **a lift**, ``{type}#cancel#{job id}#lift`` with the domain and the push's
  enqueue time (in ms) as its sort key: an operator redrove that push with
  ``--uncancel`` (``lifted_at``, ``lifted_by``). It lifts the cancellations
  of that push recorded before it; another push of the ID stays cancelled,
  and a cancellation recorded after the lift wins.
- **a watermark**, ``{type}#cancel#*`` with the domain as its sort key: every
  job of the type and domain enqueued at or before ``before`` is cancelled
  (``cancel_all``), without listing them. It only moves forward.
- **the type's mark**, ``{type}#cancel#*`` with ``*`` as its sort key: the
  newest time a job's cancellation (or lift) of the type was recorded
  (``newest``), and the latest ``before`` of its watermarks (``max_before``).

So a runner reads one item per type for a batch (:meth:`Cancellations.mark`): a
job enqueued after ``newest`` has no cancellation of its own, and one enqueued
after ``max_before`` no watermark, so only a job pushed before a recent
cancellation costs a read of its own record or its domain's watermark. Every
write moves the mark first: a write that fails after it costs a runner a
read too many, and never leaves a cancellation the runner would not see.
Every item expires after :data:`~jobkit.records.CANCEL_RECORD_TTL_S`, when no
job it covers can still be delivered.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime

from jobkit.records.items import number, optional_text
from jobkit.records.keys import TYPE_MARK, JobRef, Kind, domain_key, partition_key
from jobkit.records.table import Absent, Below, ConditionFailed, Item, Table


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Cancellation:
    """A job ID's record: its newest cancellation (``at``) and its newest lift of any push (``lifted_at``)."""

    ref: JobRef
    at: float | None
    by: str
    lifted_at: float | None = None

    @property
    def recorded_at(self) -> float:
        return self.at if self.at is not None else float("-inf")

    def cancels(self, enqueued_at: float | None) -> bool:
        """Whether its cancellation covers the push enqueued at ``enqueued_at``."""
        return self.at is not None and (enqueued_at is None or enqueued_at <= self.at)

    @property
    def reason(self) -> str:
        return f"cancelled by {self.by} at {when(self.recorded_at)}"


@dataclass(frozen=True)
class Watermark:
    """``cancel_all``: the jobs of a type and domain enqueued at or before ``before``."""

    job_type: str
    domain: str | None
    before: float
    at: float
    by: str

    @property
    def recorded_at(self) -> float:
        return self.at

    def covers(self, enqueued_at: float | None) -> bool:
        return enqueued_at is None or enqueued_at <= self.before

    @property
    def reason(self) -> str:
        return f"cancelled with every job pushed before {when(self.before)}, by {self.by} at {when(self.at)}"


@dataclass(frozen=True)
class TypeMark:
    """The type's mark: its newest job cancellation or lift, and its latest watermark."""

    newest: float | None = None
    max_before: float | None = None

    def may_have_own(self, enqueued_at: float | None) -> bool:
        """Whether a job's own record may cover (or lift) it: one was recorded since it was enqueued."""
        return self.newest is not None and (enqueued_at is None or enqueued_at <= self.newest)

    def may_have_watermark(self, enqueued_at: float | None) -> bool:
        """Whether a watermark of some domain reaches back to the job's push."""
        return self.max_before is not None and (enqueued_at is None or enqueued_at <= self.max_before)


NOTHING_CANCELLED = TypeMark()


def covering(
    own: Cancellation | None, watermark: Watermark | None, enqueued_at: float | None
) -> Cancellation | Watermark | None:
    """What cancels the push enqueued at ``enqueued_at``, of its job's record and
    its domain's watermark: the one recorded last (a lift of that push recorded
    after it is for the caller to read: :meth:`Cancellations.lifted`)."""
    covers: list[Cancellation | Watermark] = []
    if own is not None and own.cancels(enqueued_at):
        covers.append(own)
    if watermark is not None and watermark.covers(enqueued_at):
        covers.append(watermark)
    if not covers:
        return None
    latest = max(covers, key=lambda c: c.recorded_at)
    return latest


class Cancellations:
    """The cancellation records over one table. Every method may raise
    :class:`~jobkit.records.TableUnavailable`."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def cancel(self, ref: JobRef, at: float, by: str, expires_at: int) -> None:
        """Record a job's cancellation (a later one recorded already stands: ``at`` only moves forward).

        It is recorded after any lift the record holds: a cancellation written
        after a lift, in its millisecond or from a clock behind the lifter's,
        is recorded one millisecond after the lift, so it wins (a lift wins a tie)."""
        for _ in range(_ORDERING_TRIES):
            self._raise_mark(ref.job_type, "newest", at, expires_at)
            try:
                self._table.update(
                    _job_key(ref),
                    {"at": at, "by": by, "expires_at": expires_at},
                    when=(Absent("at") | Below("at", at)) & (Absent("lifted_at") | Below("lifted_at", at)),
                )
                return
            except ConditionFailed as lost:
                lifted_at = number(lost.item or {}, "lifted_at")
                if lifted_at is None or lifted_at < at:
                    return  # a later cancellation stands
                at = lifted_at + _AFTER_S
        # lifts kept being recorded past it while it wrote: they came after it, and stand

    def lift(self, ref: JobRef, pushed_at: float | None, at: float, by: str, expires_at: int) -> None:
        """Take back the cancellations recorded until ``at`` of the push of a job
        enqueued at ``pushed_at`` (as the runner reads it), its own and a watermark's,
        and those recorded before it from a clock ahead of ``at`` (two reads)."""
        own, watermark = self.of_job(ref), self.watermark(ref.job_type, ref.domain)
        at = max([at] + [c.recorded_at for c in (own, watermark) if c is not None])  # a lift wins a tie
        self._raise_mark(ref.job_type, "newest", at, expires_at)
        self._table.put(_lift_key(ref, pushed_at), {"lifted_at": at, "lifted_by": by, "expires_at": expires_at})
        with suppress(ConditionFailed):
            self._table.update(
                _job_key(ref),
                {"lifted_at": at, "expires_at": expires_at},
                when=Absent("lifted_at") | Below("lifted_at", at),
                want_old=False,
            )

    def deciding(
        self, ref: JobRef, enqueued_at: float | None, own: Cancellation | None, watermark: Watermark | None
    ) -> Cancellation | Watermark | None:
        """What cancels the push of ``ref`` enqueued at ``enqueued_at``, given its
        job's record and its domain's watermark: the one recorded last, unless
        that push was lifted after it (read only when the record says a lift
        of some push of the ID came after it)."""
        latest = covering(own, watermark, enqueued_at)
        if latest is None or own is None or own.lifted_at is None or own.lifted_at < latest.recorded_at:
            return latest
        lifted = self.lifted(ref, enqueued_at)
        return None if lifted is not None and lifted >= latest.recorded_at else latest

    def lifted(self, ref: JobRef, pushed_at: float | None) -> float | None:
        """When the push of a job enqueued at ``pushed_at`` was last lifted, if it was (one item read)."""
        item = self._table.get(_lift_key(ref, pushed_at))
        return number(item, "lifted_at") if item is not None else None

    def cancel_all(
        self, job_type: str, domain: str | None, before: float, at: float, by: str, expires_at: int
    ) -> Watermark:
        """Move the domain's watermark up to ``before`` (never down). Returns the watermark as it stands.

        It is recorded after every lift of the type recorded before it (one
        millisecond after the newest, when the lifter's clock was ahead), so a
        push lifted before it is cancelled again."""
        newest = number(self._raise_mark(job_type, "max_before", before, expires_at), "newest")
        if newest is not None and newest >= at:
            at = newest + _AFTER_S
        try:
            self._table.update(
                _watermark_key(job_type, domain),
                {"before": before, "at": at, "by": by, "expires_at": expires_at},
                when=Absent("before") | Below("before", before),
            )
        except ConditionFailed as lost:
            stored = _watermark(job_type, domain, lost.item or {})
            if stored is not None:
                return stored
        return Watermark(job_type, domain, before, at, by)

    def mark(self, job_type: str) -> TypeMark:
        """The type's mark (a strongly consistent read of one item)."""
        item = self._table.get((partition_key(job_type, Kind.CANCEL, TYPE_MARK), TYPE_MARK))
        if item is None:
            return NOTHING_CANCELLED
        return TypeMark(number(item, "newest"), number(item, "max_before"))

    def watermark(self, job_type: str, domain: str | None) -> Watermark | None:
        """The domain's watermark, if ``cancel_all`` set one (a strongly consistent read)."""
        item = self._table.get(_watermark_key(job_type, domain))
        return _watermark(job_type, domain, item) if item is not None else None

    def of_job(self, ref: JobRef) -> Cancellation | None:
        """The job ID's record in its domain, if one was written (a strongly consistent read)."""
        item = self._table.get(_job_key(ref))
        if item is None:
            return None
        at, lifted_at = number(item, "at"), number(item, "lifted_at")
        if at is None and lifted_at is None:
            return None
        return Cancellation(ref, at, (optional_text(item, "by") or "?"), lifted_at=lifted_at)

    def _raise_mark(self, job_type: str, name: str, value: float, expires_at: int) -> Item:
        """Move the type's mark's ``name`` up to ``value``; returns the mark as it stands."""
        try:
            return (
                self._table.update(
                    (partition_key(job_type, Kind.CANCEL, TYPE_MARK), TYPE_MARK),
                    {name: value, "expires_at": expires_at},
                    when=Absent(name) | Below(name, value),
                    want_new=True,
                )
                or {}
            )
        except ConditionFailed as lost:  # a newer one moved it further already
            return lost.item or {}


_AFTER_S = 0.001  # one millisecond: the resolution of a lift's key
_ORDERING_TRIES = 3


def _job_key(ref: JobRef) -> tuple[str, str]:
    return partition_key(ref.job_type, Kind.CANCEL, ref.job_id), domain_key(ref.domain)


def _lift_key(ref: JobRef, pushed_at: float | None) -> tuple[str, str]:
    """A lift's item: the job ID's ``#lift`` partition (no job ID holds ``#``), and its
    domain and push (read from the right: the push is digits, or ``-`` for a push without a time)."""
    push = "-" if pushed_at is None else str(round(pushed_at * 1000))
    return partition_key(ref.job_type, Kind.CANCEL, f"{ref.job_id}#lift"), f"{domain_key(ref.domain)}@{push}"


def _watermark_key(job_type: str, domain: str | None) -> tuple[str, str]:
    return partition_key(job_type, Kind.CANCEL, TYPE_MARK), domain_key(domain)


def _watermark(job_type: str, domain: str | None, item: Item) -> Watermark | None:
    before, at = number(item, "before"), number(item, "at")
    if before is None or at is None:
        return None
    return Watermark(job_type, domain, before, at, (optional_text(item, "by") or "?"))
