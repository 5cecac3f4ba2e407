"""Shared helpers for the benchmarks: a moto server in its own process (so the
client's CPU time is the client's alone), and an AWS request counter."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on a free loopback port, in a child process. Yields its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # with the local stack's transactions (moto's own copy the whole table to roll one back: a batch
    # member's end would cost the table, and 2,000 of them exhaust the machine), one item operation at a time
    launch = (
        "import sys; from moto.server import main;"
        " from jobkit.local.moto_patches import item_rollback_transactions, serial_dynamodb;"
        " patches = [item_rollback_transactions(), serial_dynamodb()];"
        " [p.__enter__() for p in patches]; main(sys.argv[1:])"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", launch, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("moto server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def runner_environment(declaration: dict[str, Any], queue: str) -> dict[str, str]:
    """The environment of a runner container, as the template gives it (its
    declaration as JSON, its queue), for a fresh interpreter that imports jobkit
    and the benchmarks' job classes from this repo."""
    import json

    return {
        **os.environ,
        **CREDENTIALS,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT / "benchmarks")]),
        "POWERTOOLS_SERVICE_NAME": "jobs",
        "JOBKIT_DECLARATION": json.dumps(declaration),
        "JOBKIT_QUEUE_URLS": "{}",
        "JOBKIT_QUEUE": queue,
    }


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block, then put back what was there."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def aws_environment(endpoint_url: str | None) -> Iterator[None]:
    """Credentials for the emulator, and its endpoint for every client (boto3 reads
    AWS_ENDPOINT_URL); without an endpoint, clients use AWS's (which moto in-process intercepts)."""
    with environment(CREDENTIALS):
        saved = os.environ.pop("AWS_ENDPOINT_URL", None)
        if endpoint_url:
            os.environ["AWS_ENDPOINT_URL"] = endpoint_url
        try:
            yield
        finally:
            os.environ.pop("AWS_ENDPOINT_URL", None)
            if saved is not None:
                os.environ["AWS_ENDPOINT_URL"] = saved


class ApiCalls:
    """Counts every AWS API call made in this process, by service and operation,
    whoever made the client (Celery's kombu makes its own). Instrumentation only:
    each call still goes to the endpoint."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        #: The same, by the name of the thread that made each call.
        self.by_thread: Counter[tuple[str, str]] = Counter()
        #: DynamoDB items written (a transaction writes each of its items; DynamoDB bills each).
        self.dynamodb_writes = 0

    @contextlib.contextmanager
    def counting(self) -> Iterator[ApiCalls]:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call
        calls, by_thread = self.calls, self.by_thread

        def counted(client: Any, operation_name: str, api_params: Any) -> Any:
            name = f"{client.meta.service_model.service_name}.{operation_name}"
            calls[name] += 1
            self.dynamodb_writes += _items_written(name, api_params)
            by_thread[(threading.current_thread().name, name)] += 1
            return original(client, operation_name, api_params)

        BaseClient._make_api_call = counted  # type: ignore[method-assign]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[method-assign]

    def total(self, prefix: str = "") -> int:
        return sum(n for name, n in self.calls.items() if name.startswith(prefix))

    def reset(self) -> None:
        self.calls.clear()
        self.by_thread.clear()
        self.dynamodb_writes = 0


def _items_written(name: str, params: Any) -> int:
    """The DynamoDB items a call writes: one per put, update or delete, each item of a transaction or batch write."""
    if name in ("dynamodb.PutItem", "dynamodb.UpdateItem", "dynamodb.DeleteItem"):
        return 1
    if name == "dynamodb.TransactWriteItems":
        return sum(1 for item in params.get("TransactItems", ()) if "ConditionCheck" not in item)
    if name == "dynamodb.BatchWriteItem":
        return sum(len(requests) for requests in params.get("RequestItems", {}).values())
    return 0
