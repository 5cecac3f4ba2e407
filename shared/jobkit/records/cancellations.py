"""Cancellations: jobs of a ``cancellable`` type that must not run.

Three kinds of item, all under the type's ``cancel`` kind (:mod:`jobkit.records.keys`),
which producers and operators write and a runner only reads:

- **a job's cancellation**, ``{type}#cancel#{job id}`` with the domain as its
  sort key: when it was recorded (``at``, the canceller's clock), by whom,
  and ``lifted`` once an operator took it back (``jobkit dlq redrive --uncancel``).
  It covers the pushes of that ID enqueued at or before ``at``: an ID pushed
  again after it is another job, and runs.
- **a watermark**, ``{type}#cancel#*`` with the domain as its sort key: every
  job of the type and domain enqueued at or before ``before`` is cancelled
  (``cancel_all``), without listing them. It only moves forward.
- **the type's mark**, ``{type}#cancel#*`` with ``*`` as its sort key: the
  newest time a job's cancellation of the type was recorded or lifted.

So a runner learns everything it needs of a type with one strongly consistent
query of ``{type}#cancel#*`` (:meth:`Cancellations.of_type`): a job enqueued
after the mark has no cancellation of its own, and only a job enqueued at or
before it costs a read of its own record. Every item expires after
:data:`~jobkit.records.CANCEL_RECORD_TTL_S`, when no job it covers can still
be delivered.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime

from jobkit.records.keys import TYPE_MARK, JobRef, Kind, domain_from_key, domain_key, partition_key
from jobkit.records.table import Absent, Below, ConditionFailed, Item, Table


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Cancellation:
    """A job's cancellation (``lifted``: an operator took it back)."""

    ref: JobRef
    at: float
    by: str
    lifted: bool = False

    def covers(self, enqueued_at: float | None) -> bool:
        """Whether it cancels the push of its job ID enqueued at ``enqueued_at``."""
        return not self.lifted and (enqueued_at is None or enqueued_at <= self.at)

    @property
    def reason(self) -> str:
        return f"cancelled by {self.by} at {_when(self.at)}"


@dataclass(frozen=True)
class Watermark:
    """``cancel_all``: the jobs of a type and domain enqueued at or before ``before``."""

    job_type: str
    domain: str | None
    before: float
    at: float
    by: str

    def covers(self, enqueued_at: float | None) -> bool:
        return enqueued_at is None or enqueued_at <= self.before

    @property
    def reason(self) -> str:
        return f"cancelled with every job pushed before {_when(self.before)}, by {self.by} at {_when(self.at)}"


@dataclass(frozen=True)
class TypeCancellations:
    """What a type's mark partition says: its newest job cancellation, and each domain's watermark."""

    newest: float | None = None
    watermarks: Mapping[str | None, Watermark] = field(default_factory=dict)

    def may_cancel_job(self, enqueued_at: float | None) -> bool:
        """Whether a job's own record may cancel (or lift) it: one was recorded since it was enqueued."""
        return self.newest is not None and (enqueued_at is None or enqueued_at <= self.newest)


NOTHING_CANCELLED = TypeCancellations()


class Cancellations:
    """The cancellation records over one table. Every method may raise
    :class:`~jobkit.records.TableUnavailable`."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def cancel(self, ref: JobRef, at: float, by: str, expires_at: int, *, lift: bool = False) -> None:
        """Record a job's cancellation (or, with ``lift``, take it back).

        The type's mark moves first: if the second write fails, a runner reads
        one job record too many, and no cancellation exists that a runner would not see."""
        self._mark(ref.job_type, at, expires_at)
        self._table.put(_job_key(ref), {"at": at, "by": by, "lifted": True if lift else None, "expires_at": expires_at})

    def cancel_all(
        self, job_type: str, domain: str | None, before: float, at: float, by: str, expires_at: int
    ) -> Watermark:
        """Move the domain's watermark up to ``before`` (never down). Returns the watermark as it stands."""
        try:
            self._table.update(
                (partition_key(job_type, Kind.CANCEL, TYPE_MARK), domain_key(domain)),
                {"before": before, "at": at, "by": by, "expires_at": expires_at},
                when=Absent("before") | Below("before", before),
            )
        except ConditionFailed as lost:
            stored = _watermark(job_type, domain, lost.item or {})
            if stored is not None:
                return stored
        return Watermark(job_type, domain, before, at, by)

    def of_job(self, ref: JobRef) -> Cancellation | None:
        """The job ID's cancellation in its domain, if one was recorded (a strongly consistent read)."""
        item = self._table.get(_job_key(ref))
        at = item.get("at") if item is not None else None
        if item is None or not isinstance(at, int | float):
            return None
        return Cancellation(ref, float(at), _text(item, "by"), lifted=item.get("lifted") is True)

    def of_type(self, job_type: str) -> TypeCancellations:
        """The type's mark and every domain's watermark (one strongly consistent query)."""
        newest, watermarks = None, {}
        for sort_key, item in self._table.query(partition_key(job_type, Kind.CANCEL, TYPE_MARK), consistent=True):
            if sort_key == TYPE_MARK:
                value = item.get("newest")
                newest = float(value) if isinstance(value, int | float) else None
                continue
            domain = domain_from_key(sort_key)
            found = _watermark(job_type, domain, item)
            if found is not None:
                watermarks[domain] = found
        return TypeCancellations(newest, watermarks) if newest is not None or watermarks else NOTHING_CANCELLED

    def _mark(self, job_type: str, at: float, expires_at: int) -> None:
        with suppress(ConditionFailed):  # a newer cancellation moved it further already
            self._table.update(
                (partition_key(job_type, Kind.CANCEL, TYPE_MARK), TYPE_MARK),
                {"newest": at, "expires_at": expires_at},
                when=Absent("newest") | Below("newest", at),
                want_old=False,
            )


def _job_key(ref: JobRef) -> tuple[str, str]:
    return partition_key(ref.job_type, Kind.CANCEL, ref.job_id), domain_key(ref.domain)


def _watermark(job_type: str, domain: str | None, item: Item) -> Watermark | None:
    before, at = item.get("before"), item.get("at")
    if not isinstance(before, int | float) or not isinstance(at, int | float):
        return None
    return Watermark(job_type, domain, float(before), float(at), _text(item, "by"))


def _text(item: Item, name: str) -> str:
    value = item.get(name)
    return value if isinstance(value, str) else "?"
