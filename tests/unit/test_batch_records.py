"""Batch records over the in-memory table: what a read of counts that are
being written sees, and what the callbacks' pushes decide on it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jobkit.batches.control import BatchKeeper
from jobkit.core.clock import VirtualClock
from jobkit.core.spec import JobSpecification
from jobkit.records.batches import BatchRef, Callback, Member, shard_of
from jobkit.records.memory import MemoryTable
from jobkit.records.store import Records
from jobkit.records.table import Item, Key

EXPIRES = 2_000_000_000


class TornReads(MemoryTable):
    """A table whose reads of many items read them one after another (as
    BatchGetItem does on DynamoDB): each read of ``tears`` reads its first
    ``split`` keys, lets ``between`` write, then reads the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.tears: list[tuple[int, Callable[[], None]]] = []

    def get_many(self, keys: Sequence[Key], *, snapshot: bool = False) -> dict[Key, Item]:
        if snapshot or not self.tears:
            return super().get_many(keys, snapshot=snapshot)
        split, between = self.tears.pop(0)
        first = super().get_many(keys[:split])
        between()
        return {**first, **super().get_many(keys[split:])}


def _member(shards: range, prefix: str) -> Member:
    return next(m for n in range(1_000) if shard_of(m := Member("page", f"{prefix}{n}")) in shards)


def test_the_end_is_decided_on_a_snapshot_not_on_counts_read_while_children_join() -> None:
    table, clock, pushed = TornReads(), VirtualClock(1_800_000_000.0), list[JobSpecification]()
    records = Records(table)
    batches, ref = records.batches, BatchRef("b", "wiki")
    batches.open(ref, Callback("reached", {}), None, "", clock.now(), EXPIRES)
    # a parent, its child, and the child's own child: each joins before its parent ends
    parent, child, grandchild = _member(range(8, 16), "p"), _member(range(1, 8), "c"), _member(range(0, 1), "g")
    batches.add(ref, [parent], clock.now(), EXPIRES)
    batches.seal(ref, clock.now())

    def joins_then_ends(joining: Member, ending: Member) -> Callable[[], None]:
        def write() -> None:
            batches.add(ref, [joining], clock.now(), EXPIRES, open_only=False)
            batches.settle(ref, {ending: "succeeded"}, clock.now(), EXPIRES)

        return write

    # Two reads of the counts, each torn: it reads a child's shard before the child joins, and its
    # parent's after the parent ends. Keys are the batch's item, then shards 0 to 15.
    table.tears = [(9, joins_then_ends(child, parent)), (2, joins_then_ends(grandchild, child))]
    keeper = BatchKeeper(records, clock, pushed.extend)
    assert keeper.push_due(ref) == [] and pushed == []  # a torn read said it ended: the snapshot did not
    for _, writes in table.tears:  # what the second read would have seen written meanwhile
        writes()
    record = batches.read(ref, snapshot=True)
    assert record is not None and record.counts.pending == 1
    batches.settle(ref, {grandchild: "succeeded"}, clock.now(), EXPIRES)
    assert keeper.push_due(ref) == ["on_complete"]
    assert [spec.params["batch"]["total"] for spec in pushed] == [3]
