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

A member's shard is a hash of its type and ID (:data:`SHARDS` of them), so the writes of a batch of
a million leaves spread over that many items (and partitions), and a member's item and its shard's
counts sit in one partition. Each member is added and ended with one transaction that writes its
item, on a condition, and its shard's counts, so a member counts once however many times its push,
its end or a redelivery is repeated: two writes per member added, two per member that ends (and the
members of one call share their shards' writes). Reading the counts is one request for the batch's
item and every shard.

A member that was dead-lettered or cancelled and ends again (an operator redrove it) moves from that
count to its new one: a batch's counts are of its members' latest ends.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any

from jobkit.core.errors import BatchError
from jobkit.records import TableUnavailable
from jobkit.records.batch_values import (
    CALLBACKS,
    ENDS,
    FAILURES,
    PENDING,
    SHARDS,
    WITHDRAWN,
    BatchRecord,
    BatchRef,
    Callback,
    Counts,
    Member,
    clean_description,
    shard_of,
)
from jobkit.records.items import number, optional_text
from jobkit.records.keys import BATCH_PREFIX, domain_key
from jobkit.records.table import (
    Absent,
    AtLeast,
    Below,
    Cancelled,
    ConditionFailed,
    Conflict,
    Equals,
    Item,
    Key,
    Table,
    Write,
)

#: A transaction writes at most 100 items: members, their shard's counts, the batch's check.
_MEMBERS_PER_TRANSACTION = 40
#: Tries of a transaction (or snapshot read) that meets another in flight on one of its items.
_CONFLICT_TRIES = 6


class BatchConflict(BatchError):
    """A batch of that ID in that domain was opened with other callbacks."""


class Batches:
    """The batch records over one table. Every method may raise
    :class:`~jobkit.records.TableUnavailable`."""

    def __init__(self, table: Table, sleep: Callable[[float], None] = time.sleep) -> None:
        self._table = table
        self._sleep = sleep

    def open(
        self,
        ref: BatchRef,
        on_complete: Callback | None,
        on_success: Callback | None,
        description: str,
        at: float,
        expires_at: int,
        lane: str | None = None,
    ) -> float | None:
        """Record the batch, or find it recorded with the same callbacks (its description, time
        and ``lane`` stay the first's). Returns when it was sealed, if it was. Raises :class:`BatchConflict`."""
        complete, success = (c.stored() if c is not None else "" for c in (on_complete, on_success))
        first: dict[str, str | float] = {"opened_at": at, "description": description}
        first |= {"lane": lane} if lane is not None else {}
        try:
            item = self._table.update(
                _batch_key(ref),
                {"on_complete": complete, "on_success": success, "expires_at": expires_at},
                defaults=first,
                when=Absent("opened_at") | (Equals("on_complete", complete) & Equals("on_success", success)),
                want_new=True,
            )
        except ConditionFailed as lost:
            raise BatchConflict(
                f"batch {ref.batch_id!r} was opened with other callbacks"
                f" (on_complete {_named(lost.item, 'on_complete')}, on_success {_named(lost.item, 'on_success')})"
            ) from None
        return number(item or {}, "sealed_at")

    def add(
        self,
        ref: BatchRef,
        members: Sequence[Member],
        at: float,
        expires_at: int,
        *,
        open_only: bool = True,
        counted: list[Member] | None = None,
    ) -> list[Member]:
        """Count ``members`` in, each once (one added already stays as it is), and
        each with the batch's item checked in the same transaction: opened, and
        (if ``open_only``) not sealed. Returns those that were new; ``counted``
        gets them as they are written, so a caller knows them if a later write fails.

        Raises:
            BatchError: the batch was never opened, or (``open_only``) is sealed.
        """
        writes = {
            m: Write(
                _member_key(ref, m),
                {"state": PENDING, "added_at": at, "expires_at": expires_at},
                when=Absent("state") | Equals("state", WITHDRAWN),
            )
            for m in dict.fromkeys(members)
        }
        opened = AtLeast("opened_at", 0)
        check = Write(_batch_key(ref), when=opened & Absent("sealed_at") if open_only else opened, check_only=True)
        try:
            return self._counted(ref, writes, {m: {"added": 1} for m in writes}, expires_at, check=check, into=counted)
        except _CheckFailed:
            item = self._table.get(_batch_key(ref)) or {}
            if number(item, "opened_at") is None:
                raise BatchError(
                    f"batch {ref.batch_id!r} (domain {ref.domain!r}) was never opened: open it with group.batch()"
                ) from None
            raise BatchError(
                f"batch {ref.batch_id!r} is sealed: it takes no more pushes but its members' own"
            ) from None

    def withdraw(self, ref: BatchRef, members: Sequence[Member]) -> list[Member]:
        """Count pending ``members`` back out: they were never sent. Returns those withdrawn."""
        writes = {m: Write(_member_key(ref, m), {"state": WITHDRAWN}, when=Equals("state", PENDING)) for m in members}
        return self._counted(ref, writes, {m: {"added": -1} for m in writes}, None)

    def settle(self, ref: BatchRef, ends: Mapping[Member, str], at: float, expires_at: int) -> list[Member]:
        """Count each member's end (one of :data:`ENDS`): a pending member's first, or a failed one's
        new end after a redrive; any other end of a member that ended already counts nothing. Returns
        the members the batch never counted in (a member's body sent to SQS by other means than a push)."""
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
                    states.update({m: ends[m] for m in stale.counted})  # (their shards' writes were made)
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

    def read(self, ref: BatchRef, *, snapshot: bool = False) -> BatchRecord | None:
        """The batch and its counts (one request), or None if it was never opened.

        Each item is read on its own: counts read while a member's child is counted in and the member
        ends may miss the first and see the second. Only ``snapshot`` reads them all as of one instant
        (twice the cost), which is what deciding that the batch ended takes."""
        keys = [_batch_key(ref), *(_shard_key(ref, shard) for shard in range(SHARDS))]
        found = self._read(keys, snapshot)
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
            lane=optional_text(item, "lane"),
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
        """The claimed callback was pushed (unless another took the claim over meanwhile, and marks it)."""
        with suppress(ConditionFailed):
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
        domain = domain_key(ref.domain)
        for shard in range(SHARDS):
            for sort_key, item in self._table.query(_shard_partition(ref, shard), f"{domain}#", consistent=True):
                # read from the right: a domain may hold "#", a type and a job ID never do; and
                # another domain's items (its name this one's, "#" and more) are not this one's
                parts = sort_key.rsplit("#", 2)
                if "state" not in item or len(parts) != 3 or parts[0] != domain:
                    continue
                _, job_type, job_id = parts
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
        check: Write | None = None,
        into: list[Member] | None = None,
    ) -> list[Member]:
        """Write each member with its shard's counts: one transaction per shard (so two runners'
        transactions meet only on a shared shard), with ``check`` in each. A member whose condition
        fails is left out (or, if ``strict``, raised as :class:`_Stale` once every shard was tried);
        a failed ``check`` raises :class:`_CheckFailed`; a transaction that meets another in flight
        is tried again."""
        counted: list[Member] = [] if into is None else into
        start, stale = len(counted), list[Member]()
        by_shard: dict[int, list[Member]] = {}
        for m in writes:
            by_shard.setdefault(shard_of(m), []).append(m)
        for shard, shard_members in sorted(by_shard.items()):
            for chunk in _chunks(shard_members, _MEMBERS_PER_TRANSACTION):
                try:
                    counted += self._shard_transaction(ref, shard, chunk, writes, adds, expires_at, strict, check)
                except _Stale as chunk_stale:  # (strict) the other shards' writes are still made: one read for all
                    stale += chunk_stale.members
        if stale:
            raise _Stale(stale, counted[start:])
        return counted[start:]

    def _shard_transaction(
        self,
        ref: BatchRef,
        shard: int,
        members: list[Member],
        writes: Mapping[Member, Write],
        adds: Mapping[Member, Mapping[str, int]],
        expires_at: int | None,
        strict: bool,
        check: Write | None,
    ) -> list[Member]:
        conflicts = 0
        while members:
            total: Counter[str] = Counter()
            for m in members:
                total.update(adds[m])
            counts = Write(_shard_key(ref, shard), {"expires_at": expires_at} if expires_at else {}, add=dict(total))
            transaction = [writes[m] for m in members] + [counts] + ([check] if check is not None else [])
            try:
                self._table.transact(transaction)
                return members
            except Cancelled as cancelled:
                if check is not None and len(transaction) - 1 in cancelled.failed:
                    raise _CheckFailed() from None
                stale = [members[n] for n in cancelled.failed if n < len(members)]
                if strict:
                    raise _Stale(stale) from None
                members = [m for m in members if m not in stale]
            except Conflict:
                conflicts += 1
                if conflicts >= _CONFLICT_TRIES:
                    raise TableUnavailable(f"batch {ref.batch_id!r}: shard {shard} kept meeting transactions") from None
                self._sleep(random.uniform(0, 0.05 * 2**conflicts))
        return []

    def _read(self, keys: list[Key], snapshot: bool) -> dict[Key, Item]:
        for attempt in range(_CONFLICT_TRIES):
            try:
                return self._table.get_many(keys, snapshot=snapshot)
            except Conflict:
                self._sleep(random.uniform(0, 0.05 * 2 ** (attempt + 1)))
        raise TableUnavailable("a batch's snapshot read kept meeting transactions in flight")


class _CheckFailed(Exception):
    pass


class _Stale(Exception):
    def __init__(self, members: list[Member], counted: list[Member] | None = None) -> None:
        self.members, self.counted = members, counted or []


def _moves(old: str, new: str) -> bool:
    return old == PENDING or (old in FAILURES and new != old and new in ENDS)


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


__all__ = [
    "CALLBACKS",
    "ENDS",
    "FAILURES",
    "PENDING",
    "SHARDS",
    "WITHDRAWN",
    "BatchConflict",
    "BatchRecord",
    "BatchRef",
    "Batches",
    "Callback",
    "Counts",
    "Member",
    "clean_description",
    "shard_of",
]
