"""jobkit.handler: the runner Lambda's entry (from the layer), wired from its environment."""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import jobkit.handler
from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import Declaration, declaration_to_dict
from jobkit.local import FakeLambdaContext, LocalStack
from jobkit.local.esm import sqs_event

from conftest import ROOT

RUNNER_DIR = ROOT / "functions" / "runner"  # what `sam build` puts in the task root: the jobtypes package


@pytest.fixture
def example_stack(example_declaration: Declaration) -> Iterator[LocalStack]:
    # The handler runs on the real clock, as on Lambda: jobs are pushed at the real
    # time too (a job stamped ahead of the runner's clock would be refused).
    with LocalStack(example_declaration, clock=VirtualClock()) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    # The handler configures the "jobkit" logger for Lambda (JSON to stdout, no
    # propagation); put it back as it was for the tests that follow.
    package_logger = logging.getLogger("jobkit")
    saved = (list(package_logger.handlers), package_logger.level, package_logger.propagate)
    yield
    package_logger.handlers, package_logger.level, package_logger.propagate = saved
    logging.Logger.manager.loggerDict.pop("jobkit-runner", None)


def load_app(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(RUNNER_DIR))  # Lambda's task root
    # A Lambda container configures logging once; tests load the app many times
    # in one process, so forget the last configuration (and its captured stream).
    logging.Logger.manager.loggerDict.pop("jobkit-runner", None)
    # A fresh copy of the handler module: a new container, with no runner built yet.
    spec = importlib.util.spec_from_file_location("runner_app", Path(jobkit.handler.__file__))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_handler_runs_a_batch_from_its_environment(example_stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> None:
    declaration = example_stack.declaration
    monkeypatch.setenv("JOBKIT_DECLARATION", json.dumps(declaration_to_dict(declaration)))
    monkeypatch.setenv("JOBKIT_QUEUE_URLS", json.dumps(example_stack.queue_urls))
    monkeypatch.setenv("JOBKIT_QUEUE", "refreshLinks")
    good = JobSpecification("refreshLinks", {"title": "Main Page"})
    bad = JobSpecification("refreshLinks", {"title": "Module:Broken"})
    example_stack.queue_group("enwiki").push([good, bad])
    url = example_stack.queue_urls["jobkit-refreshLinks"]
    messages = example_stack.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    app = load_app(monkeypatch)
    event = sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:jobkit-refreshLinks")
    response = app.handler(event, FakeLambdaContext())
    [failed] = response["batchItemFailures"]
    failed_body = next(m["Body"] for m in messages if m["MessageId"] == failed["itemIdentifier"])
    assert json.loads(failed_body)["id"] == bad.id


def test_importing_the_handler_creates_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.session

    created: list[str] = []
    monkeypatch.setattr(botocore.session.Session, "create_client", lambda self, *a, **k: created.append(a[0]))
    load_app(monkeypatch)
    assert created == []


def test_handler_logs_json_with_job_keys_and_emits_emf(
    example_stack: LocalStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBKIT_DECLARATION", json.dumps(declaration_to_dict(example_stack.declaration)))
    monkeypatch.setenv("JOBKIT_QUEUE_URLS", json.dumps(example_stack.queue_urls))
    monkeypatch.setenv("JOBKIT_QUEUE", "refreshLinks")
    spec = JobSpecification("refreshLinks", {"title": "Main Page", "secret": "hunter2"}, domain="enwiki")
    example_stack.queue_group().push(spec)
    url = example_stack.queue_urls["jobkit-refreshLinks"]
    messages = example_stack.sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"]
    app = load_app(monkeypatch)
    capsys.readouterr()
    app.handler(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:jobkit-refreshLinks"), FakeLambdaContext())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    logs = [line for line in lines if "message" in line]
    assert any(
        log["level"] == "INFO"
        and log["service"] == "jobkit-runner"
        and log["job_id"] == spec.id
        and log["job_type"] == "refreshLinks"
        and log["domain"] == "enwiki"
        for log in logs
    ), logs
    assert all("hunter2" not in json.dumps(line) for line in lines)
    [emf] = [line for line in lines if "_aws" in line]
    assert emf["JobType"] == "refreshLinks" and emf["Succeeded"] == [1.0]


def test_a_container_whose_jobs_succeed_without_the_table_makes_no_client(
    test_declaration: Declaration, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold start pays for no client: SQS's is made when a job fails, is
    # re-enqueued or pushes; DynamoDB's when a job uses the jobs table.
    import botocore.session

    with LocalStack(test_declaration, clock=VirtualClock()) as stack:
        monkeypatch.setenv("JOBKIT_DECLARATION", json.dumps(declaration_to_dict(test_declaration)))
        monkeypatch.setenv("JOBKIT_QUEUE_URLS", json.dumps(stack.queue_urls))
        monkeypatch.setenv("JOBKIT_QUEUE", "noop")
        stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(10)])
        url = stack.queue_urls[test_declaration.queue_name("noop")]
        messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])[
            "Messages"
        ]
        created: list[str] = []
        create_client = botocore.session.Session.create_client

        def recording(self: botocore.session.Session, service: str, *args: object, **kwargs: object) -> object:
            created.append(service)
            return create_client(self, service, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(botocore.session.Session, "create_client", recording)
        app = load_app(monkeypatch)
        event = sqs_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{test_declaration.queue_name('noop')}")
        assert app.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
        assert created == []
        # and the first job that fails makes the SQS client, to set its backoff
        stack.queue_group().push(JobSpecification("alwaysFails"))
        monkeypatch.setenv("JOBKIT_QUEUE", "alwaysFails")
        url = stack.queue_urls[test_declaration.queue_name("alwaysFails")]
        [message] = stack.sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"])["Messages"]
        app = load_app(monkeypatch)
        event = sqs_event([message], f"arn:aws:sqs:us-east-1:123456789012:{test_declaration.queue_name('alwaysFails')}")
        assert len(app.handler(event, FakeLambdaContext())["batchItemFailures"]) == 1
        assert "sqs" in created
