"""What `jobkit local up` prints of a job: its outcome line (an error of
several lines stays under it) and the job's own log lines (a bad log call
is one line, not a traceback)."""

from __future__ import annotations

import logging

from jobkit.core.outcome import Outcome, RecordResult
from jobkit.local.serve import JobLinePrinter, OutcomePrinter
from jobkit.runner.log_level import running


def test_a_bad_log_call_of_a_job_is_one_line() -> None:
    printed: list[str] = []
    logger = logging.getLogger("app.jobs")
    printer = JobLinePrinter(printed.append)
    logger.addHandler(printer)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # pytest's own capture would raise on the bad call
    try:
        with running("INFO", ("sendMail", "j-1")):
            logger.info("%d items", "not a number")
            logger.info("two\nlines")
        logger.info("not a job's: no job runs")
    finally:
        logger.removeHandler(printer)
        logger.propagate = True
    assert printed[0].startswith("          log sendMail j-1: INFO app.jobs: (a log line that could not be formatted")
    assert printed[1:] == ["          log sendMail j-1: INFO app.jobs: two", "          log sendMail j-1: lines"]


def test_an_error_of_several_lines_stays_under_its_jobs_line() -> None:
    printed: list[str] = []
    result = RecordResult("m-1", "sendMail", Outcome.RETRIED, job_id="j-1", attempt=1, error="ValueError: boom\nmore")
    OutcomePrinter(printed.append).record(result)
    [line] = printed
    first, second = line.split("\n")
    assert first.endswith("ValueError: boom") and second == " " * 14 + "more"
