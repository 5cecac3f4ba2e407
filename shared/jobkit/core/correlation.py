"""Where a job came from: the correlation ID of the request (or job) that
pushed it, and the producer's trace context.

A correlation ID follows work from an app's request to every job it pushed,
and to every job those jobs pushed, down to a dead letter. It is a context
variable: the WSGI and ASGI middleware set it for a request's duration (from
``X-Request-ID``, ``X-Correlation-ID`` or ``X-Amzn-Trace-Id``'s ``Root``, or a
new one), the runner sets it while a job runs, and push stamps it on each
message. A push outside any scope makes a new ID per ``push()`` call.

The trace context is what a tracer of the producer had active: a W3C
``traceparent`` from OpenTelemetry (read only if the app has imported it),
and the X-Ray trace header that Lambda puts in ``_X_AMZN_TRACE_ID``.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import sys
from collections.abc import Mapping
from contextvars import ContextVar

#: A correlation ID as jobkit carries it: printable, no spaces, at most 64 characters.
_MAX_LENGTH = 64
_VALID = re.compile(r"[A-Za-z0-9_.:=+/@-]{1,64}")
_CHARSET = re.compile(r"[A-Za-z0-9_.:=+/@-]+")
#: Hex digits of a long job ID's SHA-256 in the correlation ID derived from it (64 bits).
_DIGEST_CHARS = 16
_ROOT = re.compile(r"(?:^|;)\s*Root=([^;\s]+)")
#: W3C trace context, version 00: version-traceid-parentid-flags.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
#: The request headers a correlation ID is taken from, in order (WSGI's environ names).
HEADERS = ("HTTP_X_REQUEST_ID", "HTTP_X_CORRELATION_ID", "HTTP_X_AMZN_TRACE_ID")

_current: ContextVar[str | None] = ContextVar("jobkit_correlation_id", default=None)


def current_correlation_id() -> str | None:
    """The correlation ID of the request or job this thread or task works for, if any."""
    return _current.get()


def new_correlation_id() -> str:
    """A new correlation ID: 96 random bits in 16 URL-safe characters (every job's
    log line carries it, so it is kept short: a UUID would add 20 bytes a line)."""
    return base64.urlsafe_b64encode(os.urandom(12)).decode("ascii")


def valid_correlation_id(value: object) -> str | None:
    """``value`` if it is a correlation ID jobkit carries, else None (a sender may send anything)."""
    return value if isinstance(value, str) and _VALID.fullmatch(value) else None


def correlation_of(sent: object, job_id: str | None) -> str | None:
    """A job's correlation ID: the one its producer sent, if valid, else one
    derived from its own job ID (:func:`correlation_from_job_id`): a job sent
    without one starts a correlation of its own, which the jobs it pushes share."""
    return valid_correlation_id(sent) or correlation_from_job_id(job_id)


def correlation_from_job_id(job_id: object) -> str | None:
    """The correlation ID a job without one takes from its ID: the ID itself
    when it is a correlation ID (every job ID of at most 64 characters is),
    else its first 47 characters, a ``.`` and 16 hex digits of its SHA-256 (64
    characters). A job ID may be 80 characters: cut short alone, two long IDs
    that share a beginning (a parent's and its children's, say) would share a
    correlation; the ``.``, which no job ID holds, keeps a derived ID from
    being taken for another job's own. None for a value with characters no
    correlation ID may hold.
    """
    if not isinstance(job_id, str):
        return None
    fits = valid_correlation_id(job_id)
    if fits is not None or not _CHARSET.fullmatch(job_id):
        return fits
    digest = hashlib.sha256(job_id.encode("ascii")).hexdigest()[:_DIGEST_CHARS]
    return f"{job_id[: _MAX_LENGTH - _DIGEST_CHARS - 1]}.{digest}"


class correlation_scope:
    """Work done inside the block (pushes, log lines) belongs to ``correlation_id``.
    ``with correlation_scope(x) as current:`` gives the ID in force (None for an invalid one).

    A class, not a generator: every job's run enters one."""

    __slots__ = ("_id", "_token")

    def __init__(self, correlation_id: str | None) -> None:
        self._id = valid_correlation_id(correlation_id)

    def __enter__(self) -> str | None:
        self._token = _current.set(self._id)
        return self._id

    def __exit__(self, *exc: object) -> None:
        # ended in another context than it began: nothing to undo here (no suppress(): it costs as much again)
        try:  # noqa: SIM105
            _current.reset(self._token)
        except ValueError:
            pass


def from_headers(headers: Mapping[str, object]) -> str:
    """A request's correlation ID from its headers (WSGI environ names, upper case
    with ``HTTP_``), or a new one."""
    for name in HEADERS:
        value = headers.get(name)
        if not isinstance(value, str):
            continue
        if name == "HTTP_X_AMZN_TRACE_ID":
            root = _ROOT.search(value)
            value = root.group(1) if root else ""
        found = valid_correlation_id(value.strip())
        if found is not None:
            return found
    return new_correlation_id()


def asgi_headers(scope: Mapping[str, object]) -> dict[str, object]:
    """An ASGI scope's headers under their WSGI environ names."""
    headers: dict[str, object] = {}
    raw = scope.get("headers")
    for pair in raw if isinstance(raw, list | tuple) else ():
        try:
            name, value = pair
            key = "HTTP_" + bytes(name).decode("latin-1").upper().replace("-", "_")
            headers.setdefault(key, bytes(value).decode("latin-1"))
        except (TypeError, ValueError):
            continue
    return headers


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the active OpenTelemetry span, if the app uses
    OpenTelemetry (it is never imported here) and a span is recording."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        value = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    except Exception:  # another version's API: no trace rather than no job
        return None
    return value if _TRACEPARENT.fullmatch(value) else None


def current_xray_header() -> str | None:
    """The X-Ray trace header of this Lambda invocation (``Root=...;Parent=...;Sampled=...``)."""
    value = os.environ.get("_X_AMZN_TRACE_ID", "")
    return value if value.startswith("Root=") and len(value) <= 256 else None


class CorrelationFilter(logging.Filter):
    """Puts ``correlation_id`` on every record logged while a correlation ID is
    set (a job's own lines among them), unless the record names one itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "correlation_id", None) is None:
            correlation_id = _current.get()
            if correlation_id is not None:
                record.correlation_id = correlation_id
        return True


def install(handlers: list[logging.Handler]) -> None:
    """Put one :class:`CorrelationFilter` on each handler (replacing an earlier one)."""
    for handler in handlers:
        for old in [f for f in handler.filters if isinstance(f, CorrelationFilter)]:
            handler.removeFilter(old)
        handler.addFilter(CorrelationFilter())
