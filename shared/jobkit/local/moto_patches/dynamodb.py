"""moto's DynamoDB item operations one at a time, so a conditional write is
atomic, and a transaction's read one snapshot, as on AWS (:func:`serial_dynamodb`)."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from typing import Any

#: moto's DynamoDB operations on items, each run under one lock by :func:`serial_dynamodb`.
_ITEM_OPERATIONS = (
    "put_item",
    "get_item",
    "batch_get_item",
    "query",
    "scan",
    "update_item",
    "delete_item",
    "transact_write_items",
    "execute_statement",
    "execute_transaction",
    "batch_execute_statement",
)


@contextlib.contextmanager
def serial_dynamodb() -> Iterator[None]:
    backend_class = importlib.import_module("moto.dynamodb.models").DynamoDBBackend
    lock = threading.RLock()
    originals = {name: getattr(backend_class, name) for name in _ITEM_OPERATIONS}  # all there: check_moto

    def serialised(operation: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return operation(self, *args, **kwargs)

        return run

    # a transaction's read is moto's handler reading one item after another: one snapshot on AWS
    handler_class = importlib.import_module("moto.dynamodb.responses").DynamoHandler
    snapshot = handler_class.transact_get_items
    for name, operation in originals.items():
        setattr(backend_class, name, serialised(operation))
    handler_class.transact_get_items = serialised(snapshot)
    try:
        yield
    finally:
        handler_class.transact_get_items = snapshot
        for name, operation in originals.items():
            setattr(backend_class, name, operation)
