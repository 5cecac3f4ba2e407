"""What is kept of an error a job raised: its class, and the text the job
allows (:meth:`jobkit.Job.error_message`).

Every copy the runner keeps goes through here: WARNING and ERROR logs, the DLQ
copy's ``jobkit.error`` attribute, failure records and status records. A job
that keeps params out of its error text keeps them out of all of them,
including the traceback tail, whose last line would otherwise repeat the
message.
"""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobkit.jobs.job import Job

log = logging.getLogger(__name__)

TRACEBACK_LINES = 12
MAX_MESSAGE_CHARS = 4096


def error_message(job: Job | None, error: BaseException) -> str:
    """The job's own account of ``error`` (``str(error)`` unless it overrides it),
    as text every store can hold."""
    if job is None:
        return storable(text_of(error))[:MAX_MESSAGE_CHARS]
    try:
        return storable(str(job.error_message(error)))[:MAX_MESSAGE_CHARS]
    except Exception:  # a broken hook must not lose the failure: keep the class only
        log.exception("%s.error_message() raised; keeping only the error's class", type(job).__name__)
        return ""


def text_of(error: BaseException) -> str:
    """``str(error)``, or nothing when the error's ``__str__`` itself raises
    (the failure is still recorded, by its class)."""
    try:
        return str(error)
    except Exception:
        return ""


def storable(text: str) -> str:
    """``text`` with anything that is not valid Unicode (a lone surrogate, such as
    a file name decoded with ``surrogateescape``) replaced: DynamoDB, SQS and
    JSON logs take UTF-8 only."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def describe(error: BaseException, message: str) -> str:
    """``ErrorClass: message`` (or the class alone)."""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def traceback_tail(error: BaseException, message: str, lines: int = TRACEBACK_LINES) -> str:
    """The last lines of the traceback. When the job reworded its error, only
    the frames are kept, and the last line says what the job allowed: a chained
    exception's message could hold what it kept out."""
    if message == storable(text_of(error)):
        formatted = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return storable("\n".join(formatted.splitlines()[-lines:]))
    frames = "".join(traceback.format_tb(error.__traceback__)).splitlines()
    return storable("\n".join([*frames[-(lines - 1) :], describe(error, message)]))
