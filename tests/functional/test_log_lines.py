"""What a runner writes to its log, through the Lambda handler: one INFO line
per successful job, and a type's log_level to make a noisy type quieter.

Logs are the largest cost of a plain job (CloudWatch Logs bills each byte),
so the line count is a contract; the bytes are a budget (``make bench``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import declaration_to_dict, parse_declaration
from jobkit.local import FakeLambdaContext, LocalStack
from jobkit.local.esm import sqs_event

from test_lambda_app import load_app

TYPES = {
    "chatty": {"class": "testjobs:ChattyJob"},
    "quiet": {"class": "testjobs:ChattyJob", "log_level": "warning"},
    "silent": {"class": "testjobs:ChattyJob", "log_level": "ERROR"},
}


@pytest.fixture
def stack() -> Iterator[LocalStack]:
    declaration = parse_declaration({"types": TYPES}, source="test")
    with LocalStack(declaration, clock=VirtualClock()) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    package_logger, root = logging.getLogger("jobkit"), logging.getLogger()
    saved = (list(package_logger.handlers), package_logger.level, package_logger.propagate)
    saved_filters = {handler: list(handler.filters) for handler in root.handlers}
    yield
    package_logger.handlers, package_logger.level, package_logger.propagate = saved
    for handler, filters in saved_filters.items():
        handler.filters = filters
    logging.Logger.manager.loggerDict.pop("jobkit-runner", None)


def run_batch(
    stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    job_type: str,
    specs: list[JobSpecification],
) -> tuple[list[dict[str, Any]], list[logging.LogRecord]]:
    """Run one batch through the handler; its JSON lines (jobkit's) and the job code's records."""
    monkeypatch.setenv("JOBKIT_DECLARATION", json.dumps(declaration_to_dict(stack.declaration)))
    monkeypatch.setenv("JOBKIT_QUEUE_URLS", json.dumps(stack.queue_urls))
    monkeypatch.setenv("JOBKIT_QUEUE", job_type)
    stack.queue_group().push(specs)
    name = stack.declaration.queue_name(job_type)
    messages = stack.sqs.receive_message(
        QueueUrl=stack.queue_urls[name], MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )["Messages"]
    app = load_app(monkeypatch)
    capsys.readouterr()
    with caplog.at_level(logging.INFO, logger="testjobs"):
        app.handler(sqs_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{name}"), FakeLambdaContext())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    return [line for line in lines if "message" in line], [r for r in caplog.records if r.name.startswith("testjobs")]


def test_a_successful_job_writes_one_info_line(
    stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    specs = [JobSpecification("chatty", {"n": n}) for n in range(10)]
    logs, _ = run_batch(stack, monkeypatch, capsys, caplog, "chatty", specs)
    info = [line for line in logs if line["level"] == "INFO"]
    # one line per job, and it says the job succeeded: none says it started
    assert sorted(line["job_id"] for line in info) == sorted(spec.id for spec in specs)
    assert all(line["message"].endswith("succeeded") and "run_time_ms" in line for line in info)


def test_a_quiet_type_writes_no_info_line_but_its_failures_still_show(
    stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ok, failing = JobSpecification("quiet", {"n": 1}), JobSpecification("quiet", {"n": 2, "fail": True})
    logs, own = run_batch(stack, monkeypatch, capsys, caplog, "quiet", [ok, failing])
    assert [line for line in logs if line["level"] == "INFO"] == []
    [retry] = [line for line in logs if line["level"] == "WARNING"]
    assert retry["job_id"] == failing.id and "retrying" in retry["message"]
    # the job's own lines: its INFO lines are dropped while it runs, its warnings kept
    assert sorted(r.getMessage() for r in own) == ["chatty job warns about 1", "chatty job warns about 2"]


def test_an_error_level_type_keeps_only_errors(
    stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing = JobSpecification("silent", {"n": 3, "fail": True})
    logs, own = run_batch(stack, monkeypatch, capsys, caplog, "silent", [failing])
    assert logs == [] and own == []


def test_a_type_that_keeps_the_default_level_is_left_alone(
    stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, own = run_batch(stack, monkeypatch, capsys, caplog, "chatty", [JobSpecification("chatty", {"n": 4})])
    assert sorted(r.getMessage() for r in own) == ["chatty job at work on 4", "chatty job warns about 4"]


def test_an_unknown_log_level_is_a_clear_error() -> None:
    from jobkit.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"types\.x\.log_level.*must be one of DEBUG, INFO, WARNING, ERROR"):
        parse_declaration({"types": {"x": {"class": "a:B", "log_level": "LOUD"}}}, source="test")
