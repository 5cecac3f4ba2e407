"""Concurrency leases: at most N holders of a key at once, across all containers.

One item per key (``{type}#lease#{key}``) holds a count, ``held``, and one
attribute per holder, ``h.{token}``, whose value is the time its lease ends.
Taking a lease is one conditional update that adds 1 to ``held`` while it is
below the limit; giving it back removes the holder and subtracts 1. A
container that dies holding a lease does not keep it: when the key is full,
the update that lost says who holds it, and leases that have ended are
reclaimed in the same conditional write that takes the new one.

A container takes one lease per key for its batch, however many of the
batch's jobs have that key: it runs them one at a time, so one lease covers
them all, and the limit counts jobs running at once.

Reclaiming is bounded: one write names at most :data:`RECLAIM_PER_WRITE`
ended leases (a condition term and a removal each), so that it stays well
inside DynamoDB's expression limits (4 KB, 300 operators) however many
containers died holding one; a key with more ended leases is cleared over a
few writes of the same acquire, the oldest first, and the rest by later ones.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from jobkit.records.keys import NO_SORT, Kind, partition_key
from jobkit.records.table import Absent, AllOf, Below, Condition, ConditionFailed, Equals, Table

HOLDER_PREFIX = "h."
#: Ended leases one conditional write reclaims: 2 operators and about 60 bytes
#: of expression each, against DynamoDB's 300 operators and 4 KB.
RECLAIM_PER_WRITE = 25
#: Writes one acquire spends reclaiming before it gives up for now (Full).
MAX_RECLAIM_WRITES = 4
#: How long an item outlives its last lease (TTL), so an idle key leaves nothing behind.
IDLE_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Lease:
    """A lease held on one key, until ``until`` (epoch seconds)."""

    job_type: str
    key: str
    holder: str
    until: float


@dataclass(frozen=True)
class Full:
    """No lease: the key's limit is reached. ``until`` is when the first live lease ends."""

    held: int
    until: float | None


class Leases:
    """Concurrency leases in the jobs table; every call is one request or two,
    and raises :class:`~jobkit.records.TableUnavailable` when the table cannot be reached."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def acquire(self, job_type: str, key: str, limit: int, *, now: float, until: float) -> Lease | Full:
        """Take one of ``limit`` leases of ``key`` until ``until``, reclaiming
        leases that ended before ``now``."""
        holder = HOLDER_PREFIX + uuid.uuid4().hex
        item_key = (partition_key(job_type, Kind.LEASES, key), NO_SORT)
        values = {holder: until, "expires_at": int(until) + IDLE_TTL_S}
        try:
            self._table.update(item_key, values, add={"held": 1}, when=Absent("held") | Below("held", limit))
            return Lease(job_type, key, holder, until)
        except ConditionFailed as lost:
            found = dict(lost.item or {})
        for _ in range(MAX_RECLAIM_WRITES):
            holders = _holders(found)
            ended = sorted((name for name, value in holders.items() if value < now), key=holders.__getitem__)
            if not ended:
                live = list(holders.values())
                held = found.get("held")
                return Full(held if isinstance(held, int) else len(live), min(live) if live else None)
            batch = ended[:RECLAIM_PER_WRITE]
            # Reclaim ended leases (and take one, if that makes room), if no one else did meanwhile.
            still_ended: Condition = AllOf(tuple(Equals(name, holders[name]) for name in batch))
            take = len(ended) == len(batch)  # the last of them: the write that makes room takes the lease
            try:
                if take:
                    condition = still_ended & Below("held", limit + len(batch))
                    self._table.update(item_key, values, remove=batch, add={"held": 1 - len(batch)}, when=condition)
                    return Lease(job_type, key, holder, until)
                found = dict(
                    self._table.update(
                        item_key, {}, remove=batch, add={"held": -len(batch)}, when=still_ended, want_new=True
                    )
                    or {}
                )
            except ConditionFailed as lost_again:
                found = dict(lost_again.item or {})
                if take:
                    live = [value for value in _holders(found).values() if value >= now]
                    return Full(len(live), min(live) if live else None)
        live = [value for value in _holders(found).values() if value >= now]
        return Full(len(live), min(live) if live else None)

    def release(self, lease: Lease) -> bool:
        """Give a lease back; ``False`` if it was no longer held (it ended, and another took its place)."""
        item_key = (partition_key(lease.job_type, Kind.LEASES, lease.key), NO_SORT)
        try:
            self._table.update(
                item_key,
                {},
                remove=[lease.holder],
                add={"held": -1},
                when=Equals(lease.holder, lease.until),
                want_old=False,
            )
        except ConditionFailed:
            return False
        return True

    def holders(self, job_type: str, key: str) -> dict[str, float]:
        """The leases of a key, live or ended, by holder (for the ops tools and tests)."""
        found = self._table.get((partition_key(job_type, Kind.LEASES, key), NO_SORT)) or {}
        return _holders(found)


def _holders(item: dict[str, object] | object) -> dict[str, float]:
    if not isinstance(item, dict):
        return {}
    return {
        name: float(value)
        for name, value in item.items()
        if name.startswith(HOLDER_PREFIX) and isinstance(value, int | float) and not isinstance(value, bool)
    }
