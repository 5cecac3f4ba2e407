"""Batches: a set of jobs that ends when every one of them has, and the
callbacks pushed then (:mod:`jobkit.batches`).

A batch is keyed by its ID and domain, across types (its members may be of
any type that declares ``batches``), under a prefix of its own that no type
name can take (``_batch``: a type name starts with a letter):

=====================================  ====================================  ==========================
partition key                          sort key                              record
=====================================  ====================================  ==========================
``_batch#{batch id}``                  ``{domain}``                          the batch: callbacks, sealed,
                                                                             callbacks' claims and fires
``_batch#{batch id}#{shard}``          ``{domain}``                          one shard's counts
``_batch#{batch id}#{shard}``          ``{domain}#{type}#{job id}``          a member: ``pending``, or how
                                                                             it ended
=====================================  ====================================  ==========================

A member's shard is a hash of its type and ID (:data:`SHARDS` of them), so
the writes of a batch of a million leaves spread over that many items (and
partitions), and a member's item and its shard's counts sit in one
partition. Each member is added and ended with one transaction that writes
its item, on a condition, and its shard's counts, so a member counts once
however many times its push, its end or a redelivery is repeated: two
writes per member added, two per member that ends (and the members of one
call share their shards' writes). Reading the counts is one request for the
batch's item and every shard.

A member that was dead-lettered or cancelled and ends again (an operator
redrove it) moves from that count to its new one: a batch's counts are of
its members' latest ends.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from jobkit.core.errors import BatchError
from jobkit.records import TableUnavailable
from jobkit.records.items import number, optional_text
from jobkit.records.keys import BATCH_PREFIX, domain_key
from jobkit.records.table import Absent, Below, Cancelled, ConditionFailed, Equals, Item, Key, Table, Write

#: The shards of a batch's counts.
SHARDS = 16
#: The ends a member may have, each a count of the batch.
ENDS = ("succeeded", "skipped", "dead_lettered", "cancelled")
#: The ends a redriven member may leave (an operator sent it back): it counts as its new end.
FAILURES = ("dead_lettered", "cancelled")
PENDING = "pending"
WITHDRAWN = "withdrawn"  # counted in, then not sent
CALLBACKS = ("on_complete", "on_success")
#: A transaction writes at most 100 items: members and their shards.
_MEMBERS_PER_TRANSACTION = 40


@dataclass(frozen=True)
class BatchRef:
    """A batch: its ID within its domain."""

    batch_id: str
    domain: str | None


@dataclass(frozen=True)
class Member:
    """A job of a batch."""

    job_type: str
    job_id: str


@dataclass(frozen=True)
class Callback:
    """A job to push when a batch ends (its type and params; the batch's domain)."""

    job_type: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def stored(self) -> str:
        return json.dumps({"type": self.job_type, "params": dict(self.params)}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def read(cls, text: str | None) -> Callback | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["type"]), dict(data["params"]))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Counts:
    """A batch's members: added, and how many ended each way."""

    added: int = 0
    ends: Mapping[str, int] = field(default_factory=dict)

    @property
    def ended(self) -> int:
        return sum(self.ends.get(end, 0) for end in ENDS)

    @property
    def pending(self) -> int:
        return self.added - self.ended

    @property
    def failures(self) -> int:
        return sum(self.ends.get(end, 0) for end in FAILURES)

    def summary(self) -> dict[str, int]:
        return {"total": self.added, "pending": self.pending, **{end: self.ends.get(end, 0) for end in ENDS}}


@dataclass(frozen=True)
class BatchRecord:
    """A batch's item and its counts."""

    ref: BatchRef
    description: str
    on_complete: Callback | None
    on_success: Callback | None
    opened_at: float | None
    sealed_at: float | None
    fired: Mapping[str, float]
    counts: Counts

    @property
    def complete(self) -> bool:
        return self.sealed_at is not None and self.counts.pending == 0

    def due(self) -> list[str]:
        """The callbacks to push now: ``on_complete`` once every member ended, and
        ``on_success`` when none of them failed besides (both only once sealed)."""
        if not self.complete:
            return []
        due = [name for name in CALLBACKS if getattr(self, name) is not None and name not in self.fired]
        return [name for name in due if name == "on_complete" or self.counts.failures == 0]


class BatchConflict(BatchError):
    """A batch of that ID in that domain was opened with other callbacks."""


class Batches:
    """The batch records over one table. Every method may raise
    :class:`~jobkit.records.TableUnavailable`."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def open(
        self,
        ref: BatchRef,
        on_complete: Callback | None,
        on_success: Callback | None,
        description: str,
        at: float,
        expires_at: int,
    ) -> float | None:
        """Record the batch, or find it recorded with the same callbacks (its
        description and time stay the first's). Returns when it was sealed, if it
        was. Raises :class:`BatchConflict`."""
        complete, success = (c.stored() if c is not None else "" for c in (on_complete, on_success))
        try:
            item = self._table.update(
                _batch_key(ref),
                {"on_complete": complete, "on_success": success, "expires_at": expires_at},
                defaults={"opened_at": at, "description": description},
                when=Absent("opened_at") | (Equals("on_complete", complete) & Equals("on_success", success)),
                want_new=True,
            )
        except ConditionFailed as lost:
            raise BatchConflict(
                f"batch {ref.batch_id!r} was opened with other callbacks"
                f" (on_complete {_named(lost.item, 'on_complete')}, on_success {_named(lost.item, 'on_success')})"
            ) from None
        return number(item or {}, "sealed_at")

    def add(self, ref: BatchRef, members: Sequence[Member], at: float, expires_at: int) -> list[Member]:
        """Count ``members`` in, each once (one added already stays as it is).
        Returns those that were new."""
        writes = {
            m: Write(
                _member_key(ref, m),
                {"state": PENDING, "added_at": at, "expires_at": expires_at},
                when=Absent("state") | Equals("state", WITHDRAWN),
            )
            for m in dict.fromkeys(members)
        }
        return self._counted(ref, writes, {m: {"added": 1} for m in writes}, expires_at)

    def withdraw(self, ref: BatchRef, members: Sequence[Member]) -> list[Member]:
        """Count pending ``members`` back out: they were never sent. Returns those withdrawn."""
        writes = {m: Write(_member_key(ref, m), {"state": WITHDRAWN}, when=Equals("state", PENDING)) for m in members}
        return self._counted(ref, writes, {m: {"added": -1} for m in writes}, None)

    def settle(self, ref: BatchRef, ends: Mapping[Member, str], at: float, expires_at: int) -> list[Member]:
        """Count each member's end (one of :data:`ENDS`): a pending member's first,
        or a failed one's new end after a redrive; any other end of a member that
        ended already counts nothing. Returns the members the batch never counted
        in (a member's body sent to SQS by other means than a push)."""
        unknown: list[Member] = []
        for chunk in _chunks(list(ends), _MEMBERS_PER_TRANSACTION):
            states = {m: PENDING for m in chunk}
            for _ in range(3):  # a member's state changed between the read and the write: read again
                moves = {m: (states[m], ends[m]) for m in chunk if _moves(states[m], ends[m])}
                writes = {
                    m: Write(_member_key(ref, m), {"state": new, "ended_at": at}, when=Equals("state", old))
                    for m, (old, new) in moves.items()
                }
                adds = {m: {new: 1, **({} if old == PENDING else {old: -1})} for m, (old, new) in moves.items()}
                try:
                    self._counted(ref, writes, adds, expires_at, strict=True)
                    break
                except _Stale as stale:
                    found = self._table.get_many([_member_key(ref, m) for m in stale.members])
                    for m in stale.members:
                        item = found.get(_member_key(ref, m))
                        states[m] = str(item.get("state")) if item is not None else ""
            else:
                raise TableUnavailable(f"batch {ref.batch_id!r}: its members' states kept changing under the count")
            unknown += [m for m in chunk if states[m] in ("", WITHDRAWN)]
        return unknown

    def seal(self, ref: BatchRef, at: float) -> None:
        """No more pushes from outside the batch: it completes once its members have ended."""
        self._table.update(_batch_key(ref), {}, defaults={"sealed_at": at}, want_old=False)

    def sealed_at(self, ref: BatchRef) -> float | None:
        """When the batch was sealed, if it was. Raises :class:`BatchError` if it was never opened (one read)."""
        item = self._table.get(_batch_key(ref))
        if item is None or number(item, "opened_at") is None:
            raise BatchError(
                f"batch {ref.batch_id!r} (domain {ref.domain!r}) was never opened: open it with group.batch()"
            )
        return number(item, "sealed_at")

    def read(self, ref: BatchRef) -> BatchRecord | None:
        """The batch and its counts (one request), or None if it was never opened."""
        keys = [_batch_key(ref), *(_shard_key(ref, shard) for shard in range(SHARDS))]
        found = self._table.get_many(keys)
        item = found.get(keys[0])
        if item is None or number(item, "opened_at") is None:
            return None
        totals: Counter[str] = Counter()
        for key in keys[1:]:
            for name, value in found.get(key, {}).items():
                if name in ("added", *ENDS) and isinstance(value, int):
                    totals[name] += value
        return BatchRecord(
            ref,
            description=optional_text(item, "description") or "",
            on_complete=Callback.read(optional_text(item, "on_complete")),
            on_success=Callback.read(optional_text(item, "on_success")),
            opened_at=number(item, "opened_at"),
            sealed_at=number(item, "sealed_at"),
            fired={name: at for name in CALLBACKS if (at := number(item, f"{name}_fired_at")) is not None},
            counts=Counts(totals["added"], {end: totals[end] for end in ENDS}),
        )

    def claim(self, ref: BatchRef, callback: str, owner: str, now: float, until: float) -> bool:
        """Take the right to push ``callback``: not pushed yet, and no live claim
        (a claim outlives the process that took it only until ``until``)."""
        try:
            self._table.update(
                _batch_key(ref),
                {f"{callback}_claim": owner, f"{callback}_claim_until": until},
                when=Absent(f"{callback}_fired_at")
                & (Absent(f"{callback}_claim") | Below(f"{callback}_claim_until", now)),
                want_old=False,
            )
        except ConditionFailed:
            return False
        return True

    def fired(self, ref: BatchRef, callback: str, owner: str, at: float) -> None:
        """The claimed callback was pushed."""
        self._table.update(
            _batch_key(ref), {f"{callback}_fired_at": at}, when=Equals(f"{callback}_claim", owner), want_old=False
        )

    def release(self, ref: BatchRef, callback: str, owner: str) -> None:
        """Give a claim back (the push failed): the next check takes it."""
        with suppress(ConditionFailed):  # another took it over already
            self._table.update(
                _batch_key(ref), {f"{callback}_claim_until": 0}, when=Equals(f"{callback}_claim", owner), want_old=False
            )

    def members(self, ref: BatchRef, state: str | None = None) -> Iterator[tuple[Member, str]]:
        """The batch's members and their states (of one ``state``), shard by shard."""
        prefix = f"{domain_key(ref.domain)}#"
        for shard in range(SHARDS):
            for sort_key, item in self._table.query(_shard_partition(ref, shard), prefix, consistent=True):
                job_type, _, job_id = sort_key[len(prefix) :].partition("#")
                found = str(item.get("state", ""))
                if state is None or found == state:
                    yield Member(job_type, job_id), found

    def _counted(
        self,
        ref: BatchRef,
        writes: Mapping[Member, Write],
        adds: Mapping[Member, Mapping[str, int]],
        expires_at: int | None,
        *,
        strict: bool = False,
    ) -> list[Member]:
        """Write each member with its shard's counts, in transactions; a member whose
        condition fails is left out (or, if ``strict``, raised as :class:`_Stale`)."""
        counted: list[Member] = []
        left = dict(writes)
        for chunk in _chunks(list(left), _MEMBERS_PER_TRANSACTION):
            members = list(chunk)
            while members:
                shards: dict[int, Counter[str]] = {}
                for m in members:
                    shards.setdefault(shard_of(m), Counter()).update(adds[m])
                batch = [writes[m] for m in members] + [
                    Write(_shard_key(ref, s), {"expires_at": expires_at} if expires_at else {}, add=dict(c))
                    for s, c in shards.items()
                ]
                try:
                    self._table.transact(batch)
                except Cancelled as cancelled:
                    stale = [members[n] for n in cancelled.failed if n < len(members)]
                    if strict:
                        raise _Stale(stale) from None
                    members = [m for m in members if m not in stale]
                    continue
                counted += members
                break
        return counted


class _Stale(Exception):
    def __init__(self, members: list[Member]) -> None:
        self.members = members


def _moves(old: str, new: str) -> bool:
    return old == PENDING or (old in FAILURES and new != old and new in ENDS)


def shard_of(member: Member) -> int:
    return zlib.crc32(f"{member.job_type}#{member.job_id}".encode()) % SHARDS


def _batch_key(ref: BatchRef) -> Key:
    return f"{BATCH_PREFIX}#{ref.batch_id}", domain_key(ref.domain)


def _shard_partition(ref: BatchRef, shard: int) -> str:
    return f"{BATCH_PREFIX}#{ref.batch_id}#{shard:02d}"


def _shard_key(ref: BatchRef, shard: int) -> Key:
    return _shard_partition(ref, shard), domain_key(ref.domain)


def _member_key(ref: BatchRef, member: Member) -> Key:
    return _shard_partition(ref, shard_of(member)), f"{domain_key(ref.domain)}#{member.job_type}#{member.job_id}"


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _named(item: Item | None, name: str) -> str:
    callback = Callback.read(optional_text(item or {}, name))
    return "none" if callback is None else repr(callback.job_type)
