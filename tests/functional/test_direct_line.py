"""A job's success line, written without logging's machinery: byte for byte
the line logging writes, and logging's own path whenever the setup is not the
one the Lambda wiring made (an app's handler, filter or keys)."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from jobkit import Job, JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.correlation import correlation_scope
from jobkit.declaration.config import Declaration, declaration_to_dict, parse_declaration
from jobkit.lambda_wiring import runner_from_environment
from jobkit.local import FakeLambdaContext, LocalStack
from jobkit.local.esm import sqs_event
from jobkit.runner import Runner
from jobkit.runner.direct_line import DirectLine


class Quiet(Job):
    def run(self) -> bool:
        return True


class Chatty(Job):
    """Logs a line of its own while it runs."""

    def run(self) -> bool:
        logging.getLogger("app.jobs").warning("working on %s", self.params.get("n"))
        return True


DECLARATION = {
    "jobkit": {"prefix": "dl"},
    "types": {
        "quiet": {"class": f"{__name__}:Quiet"},
        "hushed": {"class": f"{__name__}:Quiet", "queue": "quiet", "log_level": "WARNING"},
        "chatty": {"class": f"{__name__}:Chatty", "queue": "quiet"},
    },
}


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    # The wiring configures the "jobkit" logger for Lambda; put it back as it was.
    package_logger = logging.getLogger("jobkit")
    saved = (list(package_logger.handlers), package_logger.level, package_logger.propagate)
    yield
    package_logger.handlers, package_logger.level, package_logger.propagate = saved
    logging.Logger.manager.loggerDict.pop("dl-runner", None)


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    with LocalStack(parse_declaration(DECLARATION, source="test"), clock=VirtualClock()) as stack:
        yield stack


def wired(stack: LocalStack, monkeypatch: pytest.MonkeyPatch, out: io.StringIO) -> Runner:
    """A runner as a Lambda container wires it, its log lines going to ``out``."""
    monkeypatch.setattr("sys.stdout", out)  # where Powertools' handler writes, as Lambda's stdout
    logging.Logger.manager.loggerDict.pop("dl-runner", None)
    declaration: Declaration = stack.declaration
    monkeypatch.setenv("JOBKIT_DECLARATION", json.dumps(declaration_to_dict(declaration)))
    monkeypatch.setenv("JOBKIT_QUEUE_URLS", json.dumps(stack.queue_urls))
    monkeypatch.setenv("JOBKIT_QUEUE", "quiet")
    return runner_from_environment(__import__("os").environ)


def run(stack: LocalStack, runner: Runner, *specs: JobSpecification) -> None:
    with correlation_scope("request-1"):
        stack.queue_group("enwiki").push(list(specs))
    url = stack.queue_urls["dl-quiet"]
    messages = stack.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    response = runner.handle(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:dl-quiet"), FakeLambdaContext())
    assert response == {"batchItemFailures": []}


def lines(out: io.StringIO) -> list[str]:
    return [line for line in out.getvalue().splitlines() if line.startswith("{") and '"_aws"' not in line]


def same_but_time(line: str) -> str:
    return re.sub(r'"timestamp":"[^"]*"', '"timestamp":"T"', line)


def test_the_direct_line_is_what_logging_writes_byte_for_byte(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
    out = io.StringIO()
    runner = wired(stack, monkeypatch, out)
    assert runner.direct_line is not None
    spec = JobSpecification("quiet", {"n": 1}, id="job-1")
    run(stack, runner, spec)
    direct = lines(out)
    out.seek(0), out.truncate()
    monkeypatch.setattr(DirectLine, "_plain", lambda self: False)  # every line through logging
    run(stack, runner, JobSpecification("quiet", {"n": 1}, id="job-1"))
    logged = lines(out)
    [direct_line], [logged_line] = direct, logged
    # the same keys, in the same order, with the same values (the run time and the time apart)
    assert re.sub(r'"run_time_ms":[0-9.e-]+', "R", same_but_time(direct_line)) == re.sub(
        r'"run_time_ms":[0-9.e-]+', "R", same_but_time(logged_line)
    )
    line = json.loads(direct_line)
    assert line["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert line["location"].startswith("_run:") and line["message"] == "quiet job-1 succeeded"
    assert line["domain"] == "enwiki" and line["correlation_id"] == "request-1" and "params" not in line


def test_an_app_handler_on_the_jobkit_logger_sees_every_line(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    runner = wired(stack, monkeypatch, out)
    seen: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    app_handler = Collect()
    logging.getLogger("jobkit").addHandler(app_handler)
    try:
        run(stack, runner, JobSpecification("quiet", {"n": 2}, id="job-2"))
    finally:
        logging.getLogger("jobkit").removeHandler(app_handler)
    assert [r.getMessage() for r in seen] == ["quiet job-2 succeeded"]
    assert [json.loads(line)["job_id"] for line in lines(out)] == ["job-2"]  # and the function's log has it once


def test_an_app_filter_or_keys_send_the_line_through_logging(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    runner = wired(stack, monkeypatch, out)
    handler: Any = logging.getLogger("jobkit").handlers[0]

    def tag(record: logging.LogRecord) -> bool:
        record.tenant = "acme"
        return True

    handler.addFilter(tag)
    try:
        run(stack, runner, JobSpecification("quiet", {"n": 3}, id="job-3"))
    finally:
        handler.removeFilter(tag)
    handler.formatter.thread_safe_append_keys(request="r-1")
    try:
        run(stack, runner, JobSpecification("quiet", {"n": 4}, id="job-4"))
    finally:
        handler.formatter.thread_safe_clear_keys()
    tagged, keyed = (json.loads(line) for line in lines(out))
    assert tagged["job_id"] == "job-3" and tagged["tenant"] == "acme"
    assert keyed["job_id"] == "job-4" and keyed["request"] == "r-1"


def test_a_quieter_type_and_a_quieter_function_write_no_line(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    runner = wired(stack, monkeypatch, out)
    run(stack, runner, JobSpecification("hushed", {"n": 5}))  # log_level = "WARNING"
    assert lines(out) == []
    logging.getLogger("jobkit").setLevel(logging.WARNING)  # LOG_LEVEL=WARNING
    run(stack, runner, JobSpecification("quiet", {"n": 6}))
    assert lines(out) == []


def test_a_job_s_own_lines_still_carry_its_correlation_id(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    runner = wired(stack, monkeypatch, out)
    app_logger = logging.getLogger("app.jobs")
    app_logger.addHandler(logging.getLogger("jobkit").handlers[0])
    try:
        run(stack, runner, JobSpecification("chatty", {"n": 7}, id="job-7"))
    finally:
        app_logger.handlers.clear()
    own, succeeded = (json.loads(line) for line in lines(out))
    assert own["message"] == "working on 7" and succeeded["message"] == "chatty job-7 succeeded"
    assert own["correlation_id"] == succeeded["correlation_id"]


def test_a_formatter_it_cannot_follow_gets_no_direct_line() -> None:
    logger = logging.getLogger("dl.test.plain")
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    try:
        assert DirectLine.calibrated(logger) is None  # not Powertools' formatter
    finally:
        logger.removeHandler(handler)
