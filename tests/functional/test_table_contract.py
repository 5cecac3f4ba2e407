"""The table contract: the seven item primitives that every record kind is
written with behave the same in memory and on DynamoDB (moto), including the
corners DynamoDB defines: a comparison with a missing attribute is false, a
write to an empty key sees an item without attributes, ``None`` means absent."""

from __future__ import annotations

import pytest

from jobkit.records.table import Absent, AtLeast, AtMost, Below, ConditionFailed, Equals, Table

KEY = ("t#dup#h", "-")


def test_values_round_trip_with_their_types(table: Table) -> None:
    item = {"s": "ünï #=-", "i": 7, "big": 2**53 + 1, "f": 1732272000.125, "neg": -0.5, "yes": True, "no": False}
    table.put(KEY, {**item, "gone": None})
    assert table.get(KEY) == item
    assert table.get(("t#dup#other", "-")) is None


def test_an_update_creates_the_item_and_removes_attributes(table: Table) -> None:
    table.update(KEY, {"owner": "a", "lease_until": 10}, when=Absent("owner"))
    table.update(KEY, {"note": "x", "lease_until": None}, ("owner",))
    assert table.get(KEY) == {"note": "x"}


def test_a_losing_update_says_what_it_lost_to_only_when_asked(table: Table) -> None:
    table.update(KEY, {"owner": "a", "lease_until": 10.5})
    with pytest.raises(ConditionFailed) as lost:
        table.update(KEY, {"owner": "b"}, when=Absent("owner") | Below("lease_until", 10.5))
    assert lost.value.item == {"owner": "a", "lease_until": 10.5}
    with pytest.raises(ConditionFailed) as quiet:
        table.update(KEY, {"owner": "b"}, when=Equals("owner", "b"), want_old=False)
    assert quiet.value.item is None
    assert table.get(KEY) == {"owner": "a", "lease_until": 10.5}  # neither loser wrote


def test_comparisons_with_a_missing_attribute_are_false(table: Table) -> None:
    for condition in (Below("n", 5), AtMost("n", 5), Equals("n", 5)):
        with pytest.raises(ConditionFailed) as lost:
            table.update(KEY, {"x": 1}, when=condition)
        assert lost.value.item is None  # nothing was there to lose to
    table.update(KEY, {"n": 5}, when=Absent("n") & Absent("x"))
    table.update(KEY, {"x": 1}, when=AtMost("n", 5) & (Below("n", 5) | Equals("n", 5)))
    assert table.get(KEY) == {"n": 5, "x": 1}


def test_a_conditional_delete(table: Table) -> None:
    table.put(KEY, {"owner": "a"})
    assert not table.delete(KEY, Equals("owner", "b"))
    assert table.get(KEY) == {"owner": "a"}
    assert table.delete(KEY, Equals("owner", "a"))
    assert table.get(KEY) is None
    assert table.delete(KEY)  # deleting nothing is not an error


def test_a_query_reads_one_partition_in_sort_key_order(table: Table) -> None:
    for sk in ("=b#2", "=a#1", "=a#3", "-#1"):
        table.put(("t#runs#j", sk), {"sk_copy": sk})
    table.put(("t#runs#j2", "=a#9"), {"sk_copy": "other partition"})
    assert [sk for sk, _ in table.query("t#runs#j")] == ["-#1", "=a#1", "=a#3", "=b#2"]
    assert [sk for sk, _ in table.query("t#runs#j", "=a#", newest_first=True)] == ["=a#3", "=a#1"]
    assert [item for _, item in table.query("t#runs#j", "=b")] == [{"sk_copy": "=b#2"}]
    assert list(table.query("t#runs#none", consistent=True)) == []


def test_add_counts_from_zero_and_races_no_one(table: Table) -> None:
    assert table.update(KEY, {}, add={"held": 1}, want_new=True) == {"held": 1}
    table.update(KEY, {"h_a": 9.5}, add={"held": 2, "tat": 0.25})
    assert table.update(KEY, {}, add={"held": -1}, want_new=True) == {"held": 2, "h_a": 9.5, "tat": 0.25}
    with pytest.raises(ConditionFailed) as full:
        table.update(KEY, {}, add={"held": 1}, when=Below("held", 2))
    assert full.value.item == {"held": 2, "h_a": 9.5, "tat": 0.25}


def test_defaults_fill_only_what_is_missing(table: Table) -> None:
    first = table.update(KEY, {"latest": "a"}, defaults={"first_at": 10.0, "latest": "ignored"}, want_new=True)
    assert first == {"latest": "a", "first_at": 10.0}
    second = table.update(KEY, {"latest": "b"}, defaults={"first_at": 20.0}, want_new=True)
    assert second == {"latest": "b", "first_at": 10.0}
    assert table.update(KEY, {"latest": "c"}) is None  # nothing returned unless asked


def test_at_least(table: Table) -> None:
    table.update(KEY, {"tat": 5})
    with pytest.raises(ConditionFailed):
        table.update(KEY, {}, add={"tat": 1}, when=AtLeast("tat", 5.5))
    table.update(KEY, {}, add={"tat": 1}, when=AtLeast("tat", 5) & AtMost("tat", 5))
    assert table.get(KEY) == {"tat": 6}
    with pytest.raises(ConditionFailed):
        table.update(("t#rate#none", "-"), {"x": 1}, when=AtLeast("tat", 0))


def test_a_transaction_writes_all_or_nothing_and_names_the_writes_that_failed(table: Table) -> None:
    from jobkit.records.table import Cancelled, Write

    counter, member, other = ("t#batch#b#0", "-"), ("t#batch#b#0", "-#t#j"), ("t#batch#b#0", "-#t#k")
    table.transact([Write(member, {"state": "pending"}, when=Absent("state")), Write(counter, add={"added": 1})])
    table.transact([Write(other, {"state": "pending"}, when=Absent("state")), Write(counter, add={"added": 1})])
    with pytest.raises(Cancelled) as cancelled:
        table.transact(
            [
                Write(member, {"state": "pending"}, when=Absent("state")),
                Write(("t#batch#b#0", "-#t#new"), {"state": "pending"}, when=Absent("state")),
                Write(counter, add={"added": 2}),
            ]
        )
    assert cancelled.value.failed == {0}
    assert table.get(counter) == {"added": 2}  # the cancelled transaction wrote nothing
    assert table.get(("t#batch#b#0", "-#t#new")) is None


def test_get_many_reads_the_items_that_exist(table: Table) -> None:
    keys = [(f"t#batch#b#{n}", "-") for n in range(16)]
    for key in keys[::2]:
        table.put(key, {"added": 1})
    assert table.get_many(keys) == {key: {"added": 1} for key in keys[::2]}
