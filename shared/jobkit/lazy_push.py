"""Lazy pushes (MediaWiki's lazyPush): jobs buffered until the work that
decided on them is done, then pushed: at the end of a ``deferred()`` block,
after a WSGI or ASGI response, or when a Lambda handler returns."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from jobkit.errors import JobQueueError
from jobkit.spec import JobSpecification

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class LazyBuffer:
    """Jobs waiting for a flush, which hands them to ``push``."""

    def __init__(self, push: Callable[[list[JobSpecification]], list[str]]) -> None:
        self._push = push
        self._specs: list[JobSpecification] = []
        self._lock = threading.Lock()
        self._deferred_depth = threading.local()

    def add(self, specs: Iterable[JobSpecification]) -> None:
        with self._lock:
            self._specs.extend(specs)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._specs)

    def flush(self) -> list[str]:
        """Push everything buffered; a failure is logged with the job IDs and re-raised."""
        with self._lock:
            specs, self._specs = self._specs, []
        try:
            return self._push(specs)
        except JobQueueError as exc:
            log.error(
                "lazy push: %d job(s) not enqueued: %s",
                len(exc.failed),
                ", ".join(exc.failed_ids),
                extra={"failed_job_ids": list(exc.failed_ids)},
            )
            raise

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Flush when the outermost block (on this thread) ends, even if it raised."""
        depth = getattr(self._deferred_depth, "value", 0)
        self._deferred_depth.value = depth + 1
        try:
            yield
        finally:
            self._deferred_depth.value = depth
            if depth == 0:
                self.flush()


def flush_after(deferred: Callable[[], AbstractContextManager[object]], handler: F) -> F:
    """``handler`` run inside a ``deferred()`` block."""

    @functools.wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with deferred():
            return handler(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def wsgi_middleware(app: Callable[..., Iterable[bytes]], flush: Callable[[], object]) -> Callable[..., Iterable[bytes]]:
    """``app``, calling ``flush`` once the server has closed each response."""

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        return _FlushOnClose(app(environ, start_response), flush)

    return middleware


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def asgi_middleware(app: ASGIApp, flush: Callable[[], object]) -> ASGIApp:
    """``app`` (Starlette, FastAPI, any ASGI app), calling ``flush`` once each HTTP
    response has been sent, on a worker thread so the event loop does not wait
    on SQS. A response that fails still flushes, as a WSGI one does."""

    async def middleware(
        scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        import asyncio  # here: the push SDK's import (and a runner's cold start) does not pay for it

        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        try:
            await app(scope, receive, send)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, flush)

    return middleware


class _FlushOnClose:
    """A WSGI response iterable that flushes lazy jobs once the server closes it."""

    def __init__(self, response: Iterable[bytes], flush: Callable[[], object]) -> None:
        self._response = response
        self._flush = flush

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._response)

    def close(self) -> None:
        try:
            close = getattr(self._response, "close", None)
            if close is not None:
                close()
        finally:
            self._flush()
