"""A correlation ID follows a request's jobs: from the WSGI request that pushed
them to their log lines, their children's, their re-sent copies and their
dead letters (docs/architecture.md, "Traces and correlation")."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from ops_cli import cli_for

from jobkit import JobQueueGroup, JobSpecification
from jobkit.core.correlation import (
    CorrelationFilter,
    correlation_scope,
    current_correlation_id,
    from_headers,
    install,
)
from jobkit.local import LocalStack
from jobkit.sqs import CORRELATION_ATTRIBUTE

from conftest import START


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Captured lines, with the filter the runner's Lambda wiring installs."""
    caplog.set_level(logging.INFO)
    install([caplog.handler])
    yield caplog
    for old in [f for f in caplog.handler.filters if isinstance(f, CorrelationFilter)]:
        caplog.handler.removeFilter(old)


def request(group: JobQueueGroup, specs: list[JobSpecification], **headers: str) -> str | None:
    """One WSGI request through the group's middleware, lazily pushing ``specs``;
    returns the correlation ID the app saw."""
    seen: list[str | None] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        seen.append(current_correlation_id())
        group.lazy_push(specs)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    environ: dict[str, Any] = {f"HTTP_{name.upper()}": value for name, value in headers.items()}
    setup_testing_defaults(environ)
    response = group.wsgi_middleware(app)(environ, lambda *_: None)
    list(response)
    response.close()  # type: ignore[attr-defined]
    assert current_correlation_id() is None, "the request's ID ends with it"
    return seen[0]


def lines_of(logs: pytest.LogCaptureFixture, job_ids: Iterable[str]) -> list[logging.LogRecord]:
    ids = set(job_ids)
    return [r for r in logs.records if getattr(r, "job_id", None) in ids]


def test_a_request_id_reaches_the_jobs_it_pushed_and_their_children(
    stack: LocalStack, logs: pytest.LogCaptureFixture
) -> None:
    logs.set_level(logging.DEBUG)  # every line the runner writes for a job
    group = stack.queue_group("enwiki")
    parent = JobSpecification("fanOut", {"leaves": 2})
    assert request(group, [parent], x_request_id="req-4711") == "req-4711"
    stack.drain()

    ran = [r for r in logs.records if r.getMessage().endswith("succeeded")]
    assert len(ran) == 3  # the parent and its two children
    assert {r.job_id for r in ran} >= {parent.id}  # type: ignore[attr-defined]
    assert {r.correlation_id for r in ran} == {"req-4711"}  # type: ignore[attr-defined]
    # every line the runner wrote for the three jobs, not just their outcomes
    jobs_lines = [r for r in logs.records if getattr(r, "job_id", None) is not None]
    assert len(jobs_lines) > len(ran)
    assert {getattr(r, "correlation_id", None) for r in jobs_lines} == {"req-4711"}


def test_a_request_without_an_id_header_gets_a_new_id(stack: LocalStack, logs: pytest.LogCaptureFixture) -> None:
    group = stack.queue_group()
    first = request(group, [JobSpecification("noop", {"n": 1})])
    second = request(group, [JobSpecification("noop", {"n": 2})])
    assert first and second and first != second
    stack.drain()
    ran = [r for r in logs.records if r.getMessage().endswith("succeeded")]
    assert sorted(r.correlation_id for r in ran) == sorted([first, second])  # type: ignore[attr-defined]


def test_headers_are_read_in_order_and_the_trace_root_is_a_fallback() -> None:
    assert from_headers({"HTTP_X_REQUEST_ID": "a", "HTTP_X_CORRELATION_ID": "b"}) == "a"
    assert from_headers({"HTTP_X_CORRELATION_ID": "b"}) == "b"
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert from_headers({"HTTP_X_AMZN_TRACE_ID": trace}) == "1-5759e988-bd862e3fe1be46a994272793"
    made = from_headers({"HTTP_X_REQUEST_ID": "not valid: spaces and far too long" * 3})
    assert len(made) == 16  # an invalid header is replaced by a new ID, never carried


def test_the_job_code_s_own_lines_carry_it(stack: LocalStack, logs: pytest.LogCaptureFixture) -> None:
    with correlation_scope("from-a-job"):
        stack.queue_group().push(JobSpecification("noop", {}))
    logger = logging.getLogger("testjobs.correlation")
    with correlation_scope("job-code"):
        logger.info("a line of job code")
    assert logs.records[-1].correlation_id == "job-code"  # type: ignore[attr-defined]
    stack.drain()
    assert [r.correlation_id for r in logs.records if r.getMessage().endswith("succeeded")] == [  # type: ignore[attr-defined]
        "from-a-job"
    ]


def test_without_middleware_each_push_call_gets_a_new_id(stack: LocalStack) -> None:
    group = stack.queue_group()
    group.push([JobSpecification("noop", {"n": 1}), JobSpecification("noop", {"n": 2})])
    group.push(JobSpecification("noop", {"n": 3}))
    url = stack.queue_urls[stack.declaration.queue_name("noop")]
    messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    ids = {m["Body"]: m["MessageAttributes"][CORRELATION_ATTRIBUTE]["StringValue"] for m in messages["Messages"]}
    by_n = {body.split('"n":')[1][0]: value for body, value in ids.items()}
    assert by_n["1"] == by_n["2"] != by_n["3"]


def test_a_delay_hop_and_the_dead_letter_keep_it(stack: LocalStack, logs: pytest.LogCaptureFixture) -> None:
    group = stack.queue_group("enwiki")
    later = JobSpecification("noop", {"n": 1}, release_at=START + 2_000)  # over 900 s: one hop at least
    failing = JobSpecification("alwaysFails", {"why": "a bug"})
    request(group, [later, failing], x_correlation_id="corr-42")
    stack.drain()

    ran = [r for r in lines_of(logs, [later.id]) if r.getMessage().endswith("succeeded")]
    assert [r.correlation_id for r in ran] == ["corr-42"]  # type: ignore[attr-defined]
    assert all(r.correlation_id == "corr-42" for r in lines_of(logs, [failing.id]))  # type: ignore[attr-defined]

    # `jobkit dlq show` leads from the dead letter to the request
    shown = json.loads(cli_for(stack)("dlq", "show", "alwaysFails", failing.id, "--json").stdout)
    assert [m["correlation_id"] for m in shown["messages"]] == ["corr-42"]
    assert [m["attributes"][CORRELATION_ATTRIBUTE] for m in shown["messages"]] == ["corr-42"]
    text = cli_for(stack, columns=200)("dlq", "show", "alwaysFails", failing.id).stdout
    assert "correlation id" in text and "corr-42" in text


def test_an_asgi_request_s_jobs_carry_its_id(stack: LocalStack) -> None:
    group = stack.queue_group()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        group.lazy_push(JobSpecification("noop", {"seen": current_correlation_id()}))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "headers": [(b"x-correlation-id", b"asgi-7")]}
    asyncio.run(group.asgi_middleware(app)(scope, receive, send))
    url = stack.queue_urls[stack.declaration.queue_name("noop")]
    [message] = stack.sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert json.loads(message["Body"])["params"] == {"seen": "asgi-7"}
    assert message["MessageAttributes"][CORRELATION_ATTRIBUTE]["StringValue"] == "asgi-7"


def test_jobkit_job_shows_the_request_that_pushed_a_job(stack: LocalStack) -> None:
    group = stack.queue_group("enwiki")
    tracked = JobSpecification("tracked", {"progress": [50]})
    failing = JobSpecification("alwaysFails", {"why": "a bug"})
    request(group, [tracked, failing], x_request_id="req-job-9")
    stack.drain()
    cli = cli_for(stack, columns=200)

    # a type that tracks status: its status record holds it
    shown = json.loads(cli("job", tracked.id, "--json").stdout)
    assert shown["correlation_id"] == "req-job-9"
    assert shown["status"]["correlation_id"] == "req-job-9"
    # a type that does not: its failure records and its final attempt hold it
    shown = json.loads(cli("job", failing.id, "--json").stdout)
    assert shown["correlation_id"] == "req-job-9"
    assert shown["failures"] and {f["correlation_id"] for f in shown["failures"]} == {"req-job-9"}
    assert shown["final_attempt"]["correlation_id"] == "req-job-9"
    for job_id in (tracked.id, failing.id):
        text = cli("job", job_id).stdout
        assert "correlation id" in text and "req-job-9" in text


def test_a_streaming_response_s_pushes_carry_the_request_s_id(stack: LocalStack) -> None:
    group = stack.queue_group()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        yield b"first chunk"
        group.push(JobSpecification("noop", {"from": "the body"}))  # while the server reads the body
        yield b"second chunk"

    environ: dict[str, Any] = {"HTTP_X_REQUEST_ID": "req-stream"}
    setup_testing_defaults(environ)
    response = group.wsgi_middleware(app)(environ, lambda *_: None)
    assert list(response) == [b"first chunk", b"second chunk"]
    response.close()  # type: ignore[attr-defined]
    assert current_correlation_id() is None
    url = stack.queue_urls[stack.declaration.queue_name("noop")]
    [message] = stack.sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert message["MessageAttributes"][CORRELATION_ATTRIBUTE]["StringValue"] == "req-stream"


def test_a_job_sent_without_an_id_starts_its_own_and_its_children_share_it(
    stack: LocalStack, logs: pytest.LogCaptureFixture
) -> None:
    # as a schedule's firing, or another language's producer, sends it: the body alone
    parent = JobSpecification("fanOut", {"leaves": 2}).stamped(stack.clock.now())
    url = stack.queue_urls[stack.declaration.queue_name("fanOut")]
    stack.sqs.send_message(QueueUrl=url, MessageBody=parent.to_message())
    stack.drain()
    ran = [r for r in logs.records if r.getMessage().endswith("succeeded")]
    assert len(ran) == 3
    assert {r.correlation_id for r in ran} == {parent.id}  # type: ignore[attr-defined]
