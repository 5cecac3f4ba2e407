"""moto's DynamoDB ``TransactWriteItems`` at the cost of DynamoDB's: the items it names.

To roll a cancelled transaction back, moto deep-copies every table the
transaction touches, once for each of its items, before it writes anything:
each transaction costs the whole table, twenty times over for a batch's
twenty writes, and a fan-out of 10,000 batch members took minutes that it
takes seconds on AWS. :func:`item_rollback_transactions` keeps moto's own
transaction (its checks, its order, its errors) and hands it the table
itself for its copy; it copies the items the transaction names instead, and
puts them back if moto cancels: the same answer, and the same table after.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any


@contextlib.contextmanager
def item_rollback_transactions() -> Iterator[None]:
    models: Any = importlib.import_module("moto.dynamodb.models")
    table_class: Any = importlib.import_module("moto.dynamodb.models.table").Table
    backend_class = models.DynamoDBBackend
    original = backend_class.transact_write_items
    moto_copy = models.copy

    def deepcopy(value: Any, memo: Any = None) -> Any:
        # a table moto copies to roll back with: itself (its items are put back one by one)
        return value if isinstance(value, table_class) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        try:
            touched = [_before(self, entry) for entry in transact_items]
        except Exception:  # a request moto refuses: its own path, with its own copies, says how
            original(self, transact_items)
            return
        models.copy = SimpleNamespace(deepcopy=deepcopy)
        try:
            original(self, transact_items)
        except Exception:
            for table_name, key, attributes in reversed(touched):
                if attributes is None:
                    self.delete_item(table_name, key)
                else:
                    self.put_item(table_name, attributes)
            raise
        finally:
            models.copy = moto_copy

    backend_class.transact_write_items = transact_write_items
    try:
        yield
    finally:
        backend_class.transact_write_items = original


def _before(backend: Any, entry: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """The table, key and attributes (a copy, or None: no item) of one transaction item before it runs."""
    ((_, operation),) = entry.items()
    table_name = operation["TableName"]
    table = backend.get_table(table_name)
    key = operation.get("Key") or {
        name: operation["Item"][name] for name in (table.hash_key_attr, table.range_key_attr) if name
    }
    item = backend.get_item(table_name, key)
    return table_name, key, copy.deepcopy(item.to_json()["Attributes"]) if item is not None else None
