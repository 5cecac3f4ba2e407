"""Lazy pushes (MediaWiki's lazyPush): jobs buffered until the work that
decided on them is done, then pushed: at the end of a ``deferred()`` block,
after a WSGI or ASGI response, or when a Lambda handler returns.

The middleware also gives each request its correlation ID (see
:mod:`jobkit.core.correlation`), which every job the request pushes carries."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar, Token
from typing import Any, TypeVar

from jobkit.core.correlation import asgi_headers, correlation_scope, from_headers
from jobkit.core.errors import JobQueueError
from jobkit.core.spec import JobSpecification

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


class _Scope:
    """The jobs one request (or ``deferred()`` block) lazily pushed."""

    __slots__ = ("open", "specs")

    def __init__(self) -> None:
        self.specs: list[JobSpecification] = []
        self.open = True


class LazyBuffer:
    """Jobs waiting for a flush, which hands them to ``push``.

    Inside a request scope (a ``deferred()`` block, or a request under the WSGI
    or ASGI middleware), lazily pushed jobs belong to that scope: its end
    flushes them, and only them, so one request's jobs never leave with another
    request's response, before the request that decided on them has finished.
    The scope follows the request's thread or asyncio task (a context variable).
    Jobs lazily pushed outside any scope wait for an explicit :meth:`flush`.
    """

    def __init__(self, push: Callable[[list[JobSpecification]], list[str]]) -> None:
        self._push = push
        self._specs: list[JobSpecification] = []
        self._lock = threading.Lock()
        self._scope: ContextVar[_Scope | None] = ContextVar(f"jobkit_lazy_scope_{id(self)}", default=None)

    def _open_scope(self) -> _Scope | None:
        scope = self._scope.get()
        return scope if scope is not None and scope.open else None

    def add(self, specs: Iterable[JobSpecification]) -> None:
        scope = self._open_scope()
        if scope is not None:
            scope.specs.extend(specs)
            return
        with self._lock:
            self._specs.extend(specs)

    @property
    def pending(self) -> int:
        scope = self._open_scope()
        if scope is not None:
            return len(scope.specs)
        with self._lock:
            return len(self._specs)

    def flush(self) -> list[str]:
        """Push what is buffered (the current scope's jobs, inside one); a failure is
        logged with the job IDs and re-raised."""
        scope = self._open_scope()
        if scope is not None:
            specs, scope.specs = scope.specs, []
        else:
            with self._lock:
                specs, self._specs = self._specs, []
        return self.push_now(specs)

    def push_now(self, specs: list[JobSpecification]) -> list[str]:
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

    def begin(self) -> tuple[_Scope, Token[_Scope | None]] | None:
        """Open a scope for this thread or task, unless one is open (then it owns the jobs)."""
        if self._open_scope() is not None:
            return None
        scope = _Scope()
        return scope, self._scope.set(scope)

    def end(self, opened: tuple[_Scope, Token[_Scope | None]] | None) -> list[JobSpecification]:
        """Close a scope that :meth:`begin` opened; returns its jobs, for the caller to push."""
        if opened is None:
            return []
        scope, token = opened
        scope.open = False  # should the reset below fail, later jobs still go to the shared buffer
        with contextlib.suppress(ValueError):  # ended in another context than it began (a server's choice)
            self._scope.reset(token)
        specs, scope.specs = scope.specs, []
        return specs

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Push the jobs lazily pushed inside the outermost block when it ends, even if it raised."""
        opened = self.begin()
        try:
            yield
        finally:
            self.push_now(self.end(opened))


def flush_after(deferred: Callable[[], AbstractContextManager[object]], handler: F) -> F:
    """``handler`` run inside a ``deferred()`` block."""

    @functools.wraps(handler)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with deferred():
            return handler(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def wsgi_middleware(app: Callable[..., Iterable[bytes]], buffer: LazyBuffer) -> Callable[..., Iterable[bytes]]:
    """``app``, pushing each request's lazy jobs once the server has closed its response."""

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        correlation_id = from_headers(environ)
        with correlation_scope(correlation_id):
            opened = buffer.begin()
            try:
                response = app(environ, start_response)
            except BaseException:
                buffer.push_now(buffer.end(opened))
                raise
        return _FlushOnClose(response, correlation_id, lambda: buffer.push_now(buffer.end(opened)))

    return middleware


ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def asgi_middleware(app: ASGIApp, buffer: LazyBuffer) -> ASGIApp:
    """``app`` (Starlette, FastAPI, any ASGI app), pushing each HTTP request's lazy
    jobs once its response has been sent, on a worker thread so the event loop
    does not wait on SQS. A request that fails still pushes its jobs, as under WSGI."""

    async def middleware(
        scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        import asyncio  # here: the push SDK's import (and a runner's cold start) does not pay for it

        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        correlation_id = from_headers(asgi_headers(scope))
        with correlation_scope(correlation_id):
            opened = buffer.begin()
            try:
                await app(scope, receive, send)
            finally:
                specs = buffer.end(opened)
                if specs:  # the executor's thread does not see this task's context
                    await asyncio.get_running_loop().run_in_executor(
                        None, _in_scope, correlation_id, buffer.push_now, specs
                    )

    return middleware


def _in_scope(
    correlation_id: str, push: Callable[[list[JobSpecification]], list[str]], specs: list[JobSpecification]
) -> list[str]:
    """``push(specs)`` as part of the request with this correlation ID."""
    with correlation_scope(correlation_id):
        return push(specs)


class _FlushOnClose:
    """A WSGI response iterable that pushes the request's lazy jobs once the server
    closes it. The app's code that runs while the server reads the body (a
    streaming response's generator) and closes it runs in the request's
    correlation scope too, so what it pushes carries the request's ID."""

    def __init__(self, response: Iterable[bytes], correlation_id: str, flush: Callable[[], object]) -> None:
        self._response = response
        self._correlation_id = correlation_id
        self._flush = flush

    def __iter__(self) -> Iterator[bytes]:
        with correlation_scope(self._correlation_id):
            chunks = iter(self._response)
        while True:
            with correlation_scope(self._correlation_id):
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
            yield chunk

    def close(self) -> None:
        with correlation_scope(self._correlation_id):
            try:
                close = getattr(self._response, "close", None)
                if close is not None:
                    close()
            finally:
                self._flush()
