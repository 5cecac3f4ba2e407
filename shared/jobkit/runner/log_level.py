"""Per-type log levels: a noisy job type can go quieter.

A type's ``log_level`` (jobs.toml) is the least severe of the runner's lines
about its jobs that are written. Those lines carry the job's keys
(``job_type`` among them), so :class:`TypeLevelFilter` knows whose they are
wherever they are logged from. Lines the job's own code logs while it runs
carry no keys: the runner marks the run with :func:`running`, and the filter
applies the running job's level to them too. Lines about no job pass.

A level only quiets: ``INFO`` (the default) and ``DEBUG`` leave every line to
the function's own ``LOG_LEVEL``.

The runner's Lambda wiring puts the filter on the handlers its lines go to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import ContextVar

#: The running job's type's level, and its type and ID: one variable, set once per job.
_running: ContextVar[tuple[int, tuple[str, str] | None]] = ContextVar(
    "jobkit_running_job", default=(logging.NOTSET, None)
)


class running:
    """While a job of a type with this ``log_level`` runs in this thread or
    task; ``job`` is its type and ID, for :func:`running_job`. (A class, not a
    generator: every job's run enters one.)"""

    __slots__ = ("_token", "_value")

    def __init__(self, level: str, job: tuple[str, str] | None = None) -> None:
        self._value = (threshold(level), job)

    def __enter__(self) -> None:
        self._token = _running.set(self._value)

    def __exit__(self, *exc: object) -> None:
        _running.reset(self._token)


def running_level() -> int:
    """The running job's type's ``log_level`` (``NOTSET`` when no job runs)."""
    return _running.get()[0]


def running_job() -> tuple[str, str] | None:
    """The type and ID of the job running in this thread or task, if one is
    (a line logged now is the job's own, or jobkit's about it)."""
    return _running.get()[1]


class TypeLevelFilter(logging.Filter):
    """Drops a line below the level of the job type it is about.

    Args:
        levels: each job type's ``log_level`` (``JobType.log_level``).
    """

    def __init__(self, levels: Mapping[str, str]) -> None:
        super().__init__()
        self._levels = {name: threshold(level) for name, level in levels.items()}

    def filter(self, record: logging.LogRecord) -> bool:
        job_type = getattr(record, "job_type", None)
        if job_type is not None:
            return record.levelno >= self._levels.get(job_type, logging.NOTSET)
        return record.levelno >= _running.get()[0]


def threshold(level: str) -> int:
    """The numeric level below which a type's lines are dropped (NOTSET: none are)."""
    number = logging.getLevelName(level)
    return number if isinstance(number, int) and number > logging.INFO else logging.NOTSET


def install(levels: Mapping[str, str], handlers: list[logging.Handler]) -> None:
    """Put one filter for these levels on each handler (replacing an earlier one)."""
    for handler in handlers:
        for old in [f for f in handler.filters if isinstance(f, TypeLevelFilter)]:
            handler.removeFilter(old)
        handler.addFilter(TypeLevelFilter(levels))
