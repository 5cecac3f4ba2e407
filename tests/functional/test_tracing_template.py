"""``tracing = true``: active tracing and X-Ray permissions on that runner only,
a span per job of a traced type, and nothing at all for a runner without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from jobkit import JobQueueGroup, JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import parse_declaration
from jobkit.local import LocalStack
from jobkit.runner.stages.trace import Trace, producer_trace_id
from jobkit.sqs import MAX_JOB_BYTES, Outgoing, SendResult, message_size, string_attribute
from jobkit.template import build, logical_id

from conftest import FIXTURES, START

TYPES = {
    "traced": {"class": "testjobs:NoopJob", "tracing": True},
    "failsTraced": {"class": "testjobs:AlwaysFailsJob", "tracing": True, "queue": "traced", "max_attempts": 1},
    "plain": {"class": "testjobs:NoopJob"},
}
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def runner(template: dict[str, Any], queue: str) -> dict[str, Any]:
    properties: dict[str, Any] = template["Resources"][f"{logical_id(queue)}Runner"]["Properties"]
    return properties


def actions(properties: dict[str, Any]) -> set[str]:
    return {a for policy in properties["Policies"] for s in policy["Statement"] for a in s["Action"]}


def test_only_a_runner_with_a_traced_type_traces_and_may_send_traces() -> None:
    template = build(parse_declaration({"types": TYPES}, source="jobs.toml"))
    traced, plain = runner(template, "traced"), runner(template, "plain")
    assert traced["Tracing"] == "Active"
    assert actions(traced) >= XRAY
    assert "Tracing" not in plain
    assert not XRAY & actions(plain)


class FakeSubsegment:
    def __init__(self, name: str) -> None:
        self.name = name
        self.annotations: dict[str, Any] = {}
        self.exceptions: list[BaseException] = []
        self.closed = False

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value

    def add_exception(self, exception: BaseException, stack: Any) -> None:
        self.exceptions.append(exception)


class FakeProvider:
    def __init__(self) -> None:
        self.spans: list[FakeSubsegment] = []

    @contextmanager
    def in_subsegment(self, name: str) -> Any:
        span = FakeSubsegment(name)
        self.spans.append(span)
        yield span
        span.closed = True


class FakeTracer:
    def __init__(self) -> None:
        self.provider = FakeProvider()


def test_a_traced_type_s_jobs_run_in_a_span_linked_to_the_producer() -> None:
    declaration = parse_declaration({"types": TYPES}, source="test")
    with LocalStack(declaration, clock=VirtualClock(START)) as stack:
        tracer = FakeTracer()
        for runner_ in stack.runners.values():
            for i, stage in enumerate(runner_.stages):
                if isinstance(stage, Trace):
                    runner_.stages[i] = Trace(["traced", "failsTraced"], lambda: tracer)
        assert not any(isinstance(s, Trace) for s in stack.runners["plain"].stages)
        ok, bad = JobSpecification("traced", {}), JobSpecification("failsTraced", {})
        stack.queue_group("enwiki").push([ok, bad, JobSpecification("plain", {})])
        stack.drain()
    spans = {span.annotations["job_id"]: span for span in tracer.provider.spans}
    assert set(spans) == {ok.id, bad.id}
    assert spans[ok.id].name == "## traced" and spans[ok.id].closed and not spans[ok.id].exceptions
    assert spans[ok.id].annotations["correlation_id"]
    assert spans[bad.id].closed and [type(e).__name__ for e in spans[bad.id].exceptions] == ["RuntimeError"]


class BrokenProvider(FakeProvider):
    """The X-Ray SDK as it is with AWS_XRAY_CONTEXT_MISSING=RUNTIME_ERROR: closing a span raises."""

    @contextmanager
    def in_subsegment(self, name: str) -> Any:
        span = FakeSubsegment(name)
        self.spans.append(span)
        yield span
        raise RuntimeError("cannot find the current segment")


def test_a_span_that_cannot_close_leaves_the_job_s_outcome_as_it_was() -> None:
    types = {**TYPES, "traced": {**TYPES["traced"], "track_status": True}}
    declaration = parse_declaration({"types": types}, source="test")
    with LocalStack(declaration, clock=VirtualClock(START)) as stack:
        tracer = FakeTracer()
        tracer.provider = BrokenProvider()
        for runner_ in stack.runners.values():
            for i, stage in enumerate(runner_.stages):
                if isinstance(stage, Trace):
                    runner_.stages[i] = Trace(["traced"], lambda: tracer)
        ok = JobSpecification("traced", {})
        stack.queue_group("enwiki").push(ok)
        stack.drain()
        outcomes = [r.outcome.value for r in stack.results.results if r.job_id == ok.id]
        assert outcomes == ["succeeded"]  # once: not retried, not dead-lettered
        assert not stack.dead_letters("traced")
        assert len(tracer.provider.spans) == 1


XRAY_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


class Recording:
    """A push transport that keeps what it is asked to send."""

    def __init__(self) -> None:
        self.sent: list[Outgoing[Any]] = []

    def queue_url(self, job_type: str, priority: str | None = None) -> str:
        return f"queue:{job_type}"

    def send_batch(self, batch: Sequence[Outgoing[Any]]) -> SendResult[Any]:
        self.sent.extend(batch)
        return SendResult(sent=list(batch))


def test_push_sends_the_lambda_s_trace_header_as_sqs_s_system_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = Recording()
    group = JobQueueGroup(declaration=parse_declaration({"types": TYPES}, source="test"), transport=transport)
    group.push(JobSpecification("plain", {}))
    monkeypatch.setenv("_X_AMZN_TRACE_ID", XRAY_HEADER)
    group.push(JobSpecification("plain", {}))
    without, with_ = (message.entry("0") for message in transport.sent)
    assert "MessageSystemAttributes" not in without
    assert with_["MessageSystemAttributes"] == {  # type: ignore[typeddict-item]
        "AWSTraceHeader": {"DataType": "String", "StringValue": XRAY_HEADER}
    }
    assert set(with_["MessageAttributes"]) == {"JobType", "CorrelationId"}  # no traceparent without OpenTelemetry


def test_the_span_names_the_producer_s_trace() -> None:
    def delivery(record: dict[str, Any]) -> Any:
        return SimpleNamespace(record=record)

    assert producer_trace_id(delivery({"attributes": {"AWSTraceHeader": XRAY_HEADER}})) == (
        "1-5759e988-bd862e3fe1be46a994272793"
    )
    w3c = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    record = {"attributes": {}, "messageAttributes": {"traceparent": {"stringValue": w3c, "dataType": "String"}}}
    assert producer_trace_id(delivery(record)) == "1-4bf92f35-77b34da6a3ce929d0e0e4736"
    assert producer_trace_id(delivery({"attributes": {}})) is None


def test_a_runner_without_tracing_never_imports_a_tracer() -> None:
    """Tracing costs nothing when it is off: a runner built from a Lambda
    environment, running a job, imports neither the X-Ray SDK nor the trace stage."""
    declaration = {"jobkit": {"prefix": "test"}, "types": {"plain": {"class": "testjobs:NoopJob"}}}
    script = textwrap.dedent(
        """
        import json, sys
        from jobkit.lambda_wiring import runner_from_environment
        from jobkit.runner.delivery import Delivery

        runner = runner_from_environment(json.loads(sys.argv[1]))
        runner.stages  # built
        loaded = sorted(m for m in sys.modules if m.startswith(("aws_xray_sdk", "jobkit.runner.stages.trace")))
        print(json.dumps(loaded))
        """
    )
    environ = {
        "JOBKIT_DECLARATION": json.dumps(declaration),
        "JOBKIT_QUEUE": "plain",
        "JOBKIT_QUEUE_URLS": json.dumps({"test-plain": "https://sqs/plain", "test-plain-dlq": "https://sqs/dlq"}),
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), *sys.path]), "POWERTOOLS_DEV": "false"}
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(environ)], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_a_job_at_the_size_limit_goes_without_its_origin_rather_than_being_refused() -> None:
    transport = Recording()
    declaration = parse_declaration({"types": TYPES}, source="test")
    group = JobQueueGroup(declaration=declaration, transport=transport, clock=VirtualClock(START))
    spec = JobSpecification("plain", {"pad": ""})
    base = message_size(spec.stamped(START).to_message(), {"JobType": string_attribute("plain")})
    spec = spec.replace(params={"pad": "x" * (MAX_JOB_BYTES - base)})
    group.push([spec, JobSpecification("plain", {})])
    at_limit, small = transport.sent
    assert at_limit.size == MAX_JOB_BYTES and set(at_limit.attributes) == {"JobType"}
    assert set(small.attributes) == {"JobType", "CorrelationId"}
