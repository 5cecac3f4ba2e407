"""The jobs table in memory, for unit tests and the pytest plugin: the same
seven primitives as DynamoDB, applying the same conditions (the contract tests
run the record store over both)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

from jobkit.records import TableUnavailable
from jobkit.records.store import Records
from jobkit.records.table import Cancelled, Condition, ConditionFailed, Item, Key, Value, Write


class MemoryTable:
    """Items in a dict. ``requests`` counts primitive calls, one request each,
    as DynamoDB would bill them (a query is one request per page, and here
    every query is one page)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: dict[Key, dict[str, Value]] = {}
        self.requests = 0

    def get(self, key: Key) -> Item | None:
        with self._lock:
            self.requests += 1
            found = self.items.get(key)
            return dict(found) if found is not None else None

    def put(self, key: Key, item: Item) -> None:
        with self._lock:
            self.requests += 1
            self.items[key] = _present(item)

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
        with self._lock:
            self.requests += 1
            found = self.items.get(key)
            if when is not None and not when.holds(found or {}):
                raise ConditionFailed(dict(found) if found is not None and want_old else None)
            updated = dict(found or {})
            for name, value in (defaults or {}).items():
                if updated.get(name) is None:
                    updated[name] = value
            updated.update(values)
            for name, amount in (add or {}).items():
                current = updated.get(name)
                if current is not None and (not isinstance(current, int | float) or isinstance(current, bool)):
                    raise TableUnavailable(f"cannot add to {name!r}: it holds {type(current).__name__}")
                updated[name] = (current or 0) + amount
            for name in remove:
                updated.pop(name, None)
            self.items[key] = _present(updated)
            return dict(self.items[key]) if want_new else None

    def transact(self, writes: Sequence[Write]) -> None:
        with self._lock:
            self.requests += 1
            if len({write.key for write in writes}) != len(writes) or len(writes) > 100:
                raise TableUnavailable("a transaction writes each item once, and at most 100")
            failed = frozenset(
                n for n, w in enumerate(writes) if w.when is not None and not w.when.holds(self.items.get(w.key) or {})
            )
            if failed:
                raise Cancelled(failed)
            for write in writes:
                if write.check_only:
                    continue
                updated = {**self.items.get(write.key, {}), **write.values}
                for name, amount in write.add.items():
                    updated[name] = (updated.get(name) or 0) + amount  # type: ignore[operator]
                self.items[write.key] = _present(updated)

    def get_many(self, keys: Sequence[Key], *, snapshot: bool = False) -> dict[Key, Item]:
        with self._lock:
            self.requests += 1
            return {key: dict(self.items[key]) for key in keys if key in self.items}

    def delete(self, key: Key, when: Condition | None = None) -> bool:
        with self._lock:
            self.requests += 1
            found = self.items.get(key)
            if when is not None and not when.holds(found or {}):
                return False
            self.items.pop(key, None)
            return True

    def query(
        self, partition: str, sort_prefix: str | None = None, *, newest_first: bool = False, consistent: bool = False
    ) -> Iterator[tuple[str, Item]]:
        with self._lock:
            self.requests += 1
            found = sorted(
                (sk, dict(item))
                for (pk, sk), item in self.items.items()
                if pk == partition and (sort_prefix is None or sk.startswith(sort_prefix))
            )
        yield from reversed(found) if newest_first else found


def _present(item: Item) -> dict[str, Value]:
    """DynamoDB stores no attribute whose value is ``None``."""
    return {name: value for name, value in item.items() if value is not None}


class MemoryRecords(Records):
    """The record store over a :class:`MemoryTable`."""

    def __init__(self) -> None:
        self.memory = MemoryTable()
        super().__init__(self.memory)

    @property
    def requests(self) -> int:
        return self.memory.requests
