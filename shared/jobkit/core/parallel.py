"""A few blocking AWS requests at once: a batch's claims, and its settles in the background.

A request to DynamoDB spends its time waiting on the network, so threads
overlap them well: ten claims sent together take about one round trip
instead of ten. botocore's clients are safe to share between threads, and
their connection pool holds ten connections, as many as :data:`WORKERS`.

The pool is made on first use, so a container whose jobs never touch the
jobs table starts no thread. Each task runs in a copy of the caller's
context (:mod:`contextvars`), as the caller's own code would.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

T = TypeVar("T")
R = TypeVar("R")

#: Requests in flight at once: a batch of 10 in one round trip, within botocore's default pool.
WORKERS = 10


class Parallel:
    """A thread pool for blocking requests, made on first use."""

    def __init__(self, workers: int = WORKERS) -> None:
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> Future[R]:
        """Start ``fn(*args, **kwargs)`` in the pool, in a copy of this context."""
        context = contextvars.copy_context()
        return self._executor().submit(context.run, fn, *args, **kwargs)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, the items at once; an exception is raised
        where the loop would raise it. One item runs here, without a thread."""
        if len(items) < 2:
            return [fn(item) for item in items]
        futures = [self.submit(fn, item) for item in items]
        return [future.result() for future in futures]

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="jobkit")
            return self._pool
