"""moto's DynamoDB ``Query`` at the cost of DynamoDB's: one partition.

moto answers a table's ``Query`` by sorting every item of the table and then
keeping those of the partition asked for, so each query costs the whole
table, and a long run (the soak: 50,000 jobs and their records) slows as the
table grows. DynamoDB reads only the partition. For a query of the table
itself (no index) by its partition key, the patch hands moto the partition's
items alone, which it filters and sorts exactly as before: the same answer.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def partition_queries() -> Iterator[None]:
    table_class: Any = importlib.import_module("moto.dynamodb.models.table").Table
    original = table_class.query

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        # (moto passes index_name as the eighth argument, after the six that follow the hash key)
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name or hash_key is None or not self.range_key_attr:
            return original(self, hash_key, *args, **kwargs)
        partition = self.items.get(hash_key)
        items = list(partition.values()) if isinstance(partition, dict) else []
        self.all_items = lambda: items  # what the query's own filter would keep of the whole table
        try:
            return original(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    table_class.query = query
    try:
        yield
    finally:
        table_class.query = original
