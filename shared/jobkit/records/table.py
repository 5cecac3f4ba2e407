"""The storage port of the jobs table: seven item primitives and the conditions
they take. Every record kind (:mod:`jobkit.records.store`) is written with
these alone, so a backend implements only this module's :class:`Table`: DynamoDB
(:mod:`jobkit.records.dynamodb`) and memory (:mod:`jobkit.records.memory`).

Each primitive is one request (a transaction, or a read of many items, is
one). An item is a flat mapping of attribute names to strings, numbers,
booleans or ``None`` (absent); its key is ``(pk, sk)``.

Conditions follow DynamoDB's rules, which the memory backend applies too: a
comparison with an attribute the item lacks is false, and a write to a key that
holds no item sees an item with no attributes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

Value = str | int | float | bool | None
Item = Mapping[str, Value]
Key = tuple[str, str]  # (pk, sk)


class Condition:
    """A condition on the item a write finds; combine with ``|`` and ``&``."""

    def holds(self, item: Item) -> bool:
        raise NotImplementedError

    def __or__(self, other: Condition) -> Condition:
        return AnyOf((self, other))

    def __and__(self, other: Condition) -> Condition:
        return AllOf((self, other))


@dataclass(frozen=True)
class Absent(Condition):
    attr: str

    def holds(self, item: Item) -> bool:
        return item.get(self.attr) is None


@dataclass(frozen=True)
class Equals(Condition):
    attr: str
    value: str | int | float

    def holds(self, item: Item) -> bool:
        return item.get(self.attr) == self.value


@dataclass(frozen=True)
class Below(Condition):
    """``attr < value``."""

    attr: str
    value: int | float

    def holds(self, item: Item) -> bool:
        found = item.get(self.attr)
        return isinstance(found, int | float) and not isinstance(found, bool) and found < self.value


@dataclass(frozen=True)
class AtMost(Condition):
    """``attr <= value``."""

    attr: str
    value: int | float

    def holds(self, item: Item) -> bool:
        found = item.get(self.attr)
        return isinstance(found, int | float) and not isinstance(found, bool) and found <= self.value


@dataclass(frozen=True)
class AtLeast(Condition):
    """``attr >= value``."""

    attr: str
    value: int | float

    def holds(self, item: Item) -> bool:
        found = item.get(self.attr)
        return isinstance(found, int | float) and not isinstance(found, bool) and found >= self.value


@dataclass(frozen=True)
class AnyOf(Condition):
    parts: tuple[Condition, ...]

    def holds(self, item: Item) -> bool:
        return any(part.holds(item) for part in self.parts)


@dataclass(frozen=True)
class AllOf(Condition):
    parts: tuple[Condition, ...]

    def holds(self, item: Item) -> bool:
        return all(part.holds(item) for part in self.parts)


class ConditionFailed(Exception):
    """A conditional write lost. ``item`` is what it lost to, when the caller
    asked for it and an item was there."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("the condition did not hold")
        self.item = item


class Cancelled(Exception):
    """A transaction wrote nothing: the conditions of the writes at ``failed``
    (their indexes) did not hold."""

    def __init__(self, failed: frozenset[int]) -> None:
        super().__init__(f"the conditions of writes {sorted(failed)} did not hold")
        self.failed = failed


class Conflict(Exception):
    """A transaction (or a snapshot read) met another in flight on one of its
    items, and did nothing: try again after a moment."""


@dataclass(frozen=True)
class Write:
    """One write of a transaction: set ``values`` and add ``add`` to numbers of
    the item at ``key`` (creating it), if ``when`` holds."""

    key: Key
    values: Item = field(default_factory=dict)
    add: Mapping[str, int | float] = field(default_factory=dict)
    when: Condition | None = None
    #: Write nothing: only check ``when`` (DynamoDB's ConditionCheck).
    check_only: bool = False


class Table(Protocol):
    """One table of items. Every primitive may raise
    :class:`~jobkit.records.TableUnavailable` when the store cannot be reached."""

    def get(self, key: Key) -> Item | None:
        """The item at ``key`` (a strongly consistent read), or ``None``."""
        ...

    def put(self, key: Key, item: Item) -> None:
        """Replace whatever is at ``key`` with ``item``."""
        ...

    def update(
        self,
        key: Key,
        values: Item,
        remove: Sequence[str] = (),
        when: Condition | None = None,
        *,
        add: Mapping[str, int | float] | None = None,
        defaults: Item | None = None,
        want_old: bool = True,
        want_new: bool = False,
    ) -> Item | None:
        """Set ``values`` and remove attributes of the item at ``key`` (creating it), if
        ``when`` holds. Raises :class:`ConditionFailed`, carrying the item it
        lost to if ``want_old``.

        ``add`` adds to numbers (an absent number counts as 0), atomically, so
        writers that do not know the current value do not race; ``defaults``
        sets attributes the item lacks and leaves the others as they are.
        Returns the item as the write left it if ``want_new`` (else ``None``)."""
        ...

    def transact(self, writes: Sequence[Write]) -> None:
        """All of ``writes`` (at most 100, each to another item), or none of
        them. Raises :class:`Cancelled` naming the writes whose condition did
        not hold, or :class:`Conflict`."""
        ...

    def get_many(self, keys: Sequence[Key], *, snapshot: bool = False) -> dict[Key, Item]:
        """The items at ``keys`` that exist (strongly consistent reads; at most 100
        keys). Each is read on its own, unless ``snapshot``: then all as of one
        instant (a transaction's read, at twice the cost; may raise :class:`Conflict`)."""
        ...

    def delete(self, key: Key, when: Condition | None = None) -> bool:
        """Delete the item at ``key`` if ``when`` holds; ``False`` if it did not."""
        ...

    def query(
        self, partition: str, sort_prefix: str | None = None, *, newest_first: bool = False, consistent: bool = False
    ) -> Iterator[tuple[str, Item]]:
        """``(sort key, item)`` of a partition's items, in sort-key order
        (descending if ``newest_first``), lazily: a caller that stops early
        reads no further pages."""
        ...
