"""A job's INFO line, written the way its handler would write it, without the
cost of the logging machinery.

Every job that succeeds writes one INFO line. Through :mod:`logging` that line
took about 40% of the runner's CPU for a plain job (a caller lookup, a record,
two filters, the Powertools formatter's generic pass over the record, a second
lock for the flush, a new JSON encoder). :class:`DirectLine` writes the same
line, byte for byte, from what the runner already knows: the formatter's keys
filled in once per millisecond, the job's keys, the formatter's own
serializer, the handler's own stream, lock and filters; in about a third of the
time.

It does so only while the logging setup is the one the Lambda wiring made: the
runner's logger has no filter and reaches one handler (Powertools'
``StreamHandler``), whose filters are jobkit's own (a type's ``log_level``, the
correlation ID), and no thread-local keys are set. Anything else (a handler or
filter an app added, a formatter of its own, a level that drops INFO) and
:meth:`DirectLine.info` logs the line through :mod:`logging` as before, so an
app's handlers see every line. When it is built, a probe line is formatted both
ways in memory and compared; a formatter that writes anything differently
(another Powertools version, say) gets no direct line at all.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from jobkit.core.correlation import CorrelationFilter
from jobkit.runner.log_level import TypeLevelFilter

#: The record attributes a formatter's ``%(...)s`` keys may name, all that a direct line fills in.
_ATTRIBUTES = ("levelname", "levelno", "name", "funcName", "lineno", "asctime", "module", "filename", "pathname")
_FILTERS = (TypeLevelFilter, CorrelationFilter)
_FORMATTER_API = ("log_format", "formatTime", "serialize", "thread_safe_get_current_keys", "_get_latest_trace_id")


class _Shim:
    """What jobkit's own filters and the formatter's clock read of a record."""

    created: float

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update(values)


class DirectLine:
    """INFO lines of one logger, written straight to its one handler's stream.

    Build it with :meth:`calibrated`, after the logging setup is done.
    """

    def __init__(self, logger: logging.Logger, handler: logging.StreamHandler[Any], formatter: Any) -> None:
        self._logger, self._handler = logger, handler
        self._formatter: Any = formatter
        self._lock: Any = handler.lock
        self._log_format = dict(formatter.log_format)
        self._filters: list[Any] = list(handler.filters)
        self._module = logger.name.rpartition(".")[2]
        self._pathname = _pathname(logger.name)
        #: the record attributes the formatter fills its keys from, and never takes as extra keys
        self._reserved = frozenset(getattr(sys.modules.get(type(formatter).__module__), "RESERVED_LOG_ATTRS", ()))
        self._stamp: tuple[int, str] = (-1, "")
        self._heads: dict[tuple[tuple[str, int], str], dict[str, Any]] = {}
        self._serialize = _serializer(formatter)

    @classmethod
    def calibrated(cls, logger: logging.Logger) -> DirectLine | None:
        """A direct line for ``logger``, if its setup is one it can write for
        and a probe line comes out the same both ways; else None."""
        handlers = _handlers(logger)
        if len(handlers) != 1 or type(handlers[0]) is not logging.StreamHandler:
            return None
        handler: Any = handlers[0]
        formatter: Any = handler.formatter
        if not all(hasattr(formatter, name) for name in _FORMATTER_API) or not isinstance(formatter.log_format, dict):
            return None
        if any(type(f) not in _FILTERS for f in handler.filters):  # an app's filter may read any attribute
            return None
        if handler.lock is None:
            return None
        line = cls(logger, handler, formatter)
        return line if line._reserved and line._same_as_logging() else None

    def info(self, message: str, keys: Mapping[str, Any]) -> None:
        """``logger.info(message, extra=keys)`` from the caller's line: written
        directly while the setup is the calibrated one, else through logging."""
        if not self._plain():
            self._logger.info(message, extra=keys, stacklevel=2)  # (the caller's line, as the direct one names)
            return
        caller = sys._getframe(1)
        where = (caller.f_code.co_name, caller.f_lineno)
        now = time.time_ns()
        shim = _Shim(
            {"levelno": logging.INFO, "created": now / 1e9, "msecs": (now % 1_000_000_000) // 1_000_000, **keys}
        )
        for line_filter in self._filters:
            if not line_filter.filter(shim):
                return
        line = self._line(message, shim, where)
        handler = self._handler
        with self._lock:  # (what Handler.handle takes; StreamHandler.emit then writes and flushes)
            try:
                stream = handler.stream
                stream.write(line + handler.terminator)
                stream.flush()
            except Exception:
                handler.handleError(logging.makeLogRecord({"msg": message}))

    def _plain(self) -> bool:
        """Whether the logging setup is still the one this line was calibrated on."""
        logger, handler, formatter = self._logger, self._handler, self._formatter
        return (
            logger.isEnabledFor(logging.INFO)
            and not logger.filters
            and _handlers(logger) == [handler]
            and handler.level <= logging.INFO
            and handler.filters == self._filters
            and handler.formatter is formatter
            and self._formatter.log_format == self._log_format
            and not self._formatter.thread_safe_get_current_keys()
        )

    def _line(self, message: str, shim: _Shim, where: tuple[str, int]) -> str:
        """The formatter's text of the line (its ``format``, for a record without an exception)."""
        reserved = self._reserved
        formatted = dict(self._head(where, self._asctime(shim)))
        formatted.update({key: value for key, value in shim.__dict__.items() if key not in reserved})
        formatted["message"] = message
        formatted["xray_trace_id"] = self._formatter._get_latest_trace_id()
        return str(self._serialize({key: value for key, value in formatted.items() if value is not None}))

    def _head(self, where: tuple[str, int], asctime: str) -> dict[str, Any]:
        """The formatter's own keys, its ``%(...)s`` filled in: the same for
        every line from one place in one millisecond."""
        head = self._heads.get((where, asctime))
        if head is None:
            values = {
                "levelname": "INFO",
                "levelno": logging.INFO,
                "name": self._logger.name,
                "funcName": where[0],
                "lineno": where[1],
                "asctime": asctime,
                "module": self._module,
                "filename": self._module + ".py",
                "pathname": self._pathname,
            }
            reserved = self._reserved
            head = {
                key: value % values if value and key in reserved else value for key, value in self._log_format.items()
            }
            self._heads = {(where, asctime): head}  # (one entry: the last millisecond's)
        return head

    def _asctime(self, shim: _Shim) -> str:
        """The formatter's time, once per millisecond (it is ``strftime``)."""
        millisecond = int(shim.created * 1000)
        stamp = self._stamp  # (one tuple: threads running jobs side by side may read and write it)
        if stamp[0] != millisecond:
            stamp = self._stamp = (millisecond, str(self._formatter.formatTime(shim)))
        return stamp[1]

    def _same_as_logging(self) -> bool:
        """Format a probe line both ways, in memory: the same text, or no direct line."""
        keys = {"job_id": "probe-id", "job_type": "probe", "domain": None, "correlation_id": "c0", "run_time_ms": 1.5}
        try:
            for key, value in self._log_format.items():  # a %(...)s this line cannot fill in raises
                if value and key in self._reserved:
                    value % dict.fromkeys(_ATTRIBUTES, 0)
            record = self._logger.makeRecord(
                self._logger.name, logging.INFO, self._pathname, 1, "probe", (), None, "probe", keys
            )
            expected = self._formatter.format(record)
            shim = _Shim({"levelno": logging.INFO, "created": record.created, "msecs": record.msecs, **keys})
            return bool(self._line("probe", shim, ("probe", 1)) == expected)
        except Exception:  # a formatter this cannot follow: log as before
            return False


def _handlers(logger: logging.Logger) -> list[logging.Handler]:
    """The handlers a record of ``logger`` reaches (the loggers above it apply no filters)."""
    found: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        found.extend(current.handlers)
        if not current.propagate:
            break
        current = current.parent
    return found


def _pathname(name: str) -> str:
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    return str(path) if path else os.path.join(*name.split(".")) + ".py"


def _serializer(formatter: Any) -> Callable[[Any], str]:
    """The formatter's serializer, with its encoder made once when it is
    ``json.dumps`` with options (Powertools' own): ``json.dumps`` would make
    one per line."""
    serializer = getattr(formatter, "json_serializer", None)
    if isinstance(serializer, functools.partial) and serializer.func is json.dumps and not serializer.args:
        options = dict(serializer.keywords)
        encoder = options.pop("cls", None) or json.JSONEncoder
        return cast(Callable[[Any], str], encoder(**options).encode)
    return cast(Callable[[Any], str], formatter.serialize)
