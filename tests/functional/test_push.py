"""The push SDK against SQS on moto: routing, batching, sizes, retries, lazy pushes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

import pytest
from asgi_client import serve_one as _serve_one
from asgi_client import serve_one_async as _serve_one_async

from jobkit import JobQueueError, JobQueueGroup, JobSpecification, queue_group
from jobkit.local import LocalStack
from jobkit.sqs import Outgoing, SendFailure, SendResult
from jobkit.wiring import Wiring, reset_default_groups

from conftest import RequestCounter
from faults import FailBatchEntries, FailCalls

T = TypeVar("T")


def bodies(stack: LocalStack, queue: str) -> list[dict[str, Any]]:
    url = stack.queue_urls[stack.declaration.queue_name(queue)]
    found: dict[str, dict[str, Any]] = {}
    while True:
        batch = stack.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=600
        ).get("Messages", [])
        if not batch:
            return list(found.values())
        for message in batch:
            found[message["MessageId"]] = {**json.loads(message["Body"]), "_attributes": message["MessageAttributes"]}


def test_25_jobs_of_3_types_take_3_requests(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    # Given 25 jobs of 3 types, each type on its own queue
    specs = (
        [JobSpecification("noop", {"n": n}) for n in range(9)]
        + [JobSpecification("flaky", {"n": n, "fail_times": 0}) for n in range(8)]
        + [JobSpecification("dedup", {"n": n}) for n in range(8)]
    )
    # When they are pushed at once
    ids = stack.queue_group("enwiki").push(specs)
    # Then three SendMessageBatch requests carried them, and nothing else was asked
    assert sqs_requests.calls == {"SendMessageBatch": 3}
    assert ids == [s.id for s in specs]
    assert len(bodies(stack, "noop")) == 9
    assert len(bodies(stack, "flaky")) == 8
    landed = bodies(stack, "dedup")
    assert {b["id"] for b in landed} == {s.id for s in specs[17:]}
    assert all(b["domain"] == "enwiki" for b in landed)
    assert all(b["_attributes"]["JobType"]["StringValue"] == "dedup" for b in landed)


def test_bulk_push_costs_a_tenth_of_a_request_per_job(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    # (moto's SendMessage scans the whole queue, so a bigger push would only make the test slow)
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(300)])
    assert sqs_requests.calls == {"SendMessageBatch": 30}


def test_big_messages_pack_by_bytes(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    # 300 KiB each: three fit in a 1 MiB batch, a fourth does not.
    specs = [JobSpecification("noop", {"blob": "x" * 300 * 1024}) for _ in range(7)]
    stack.queue_group().push(specs)
    assert sqs_requests.calls == {"SendMessageBatch": 3}
    assert len(bodies(stack, "noop")) == 7


def test_oversized_spec_is_named_and_the_rest_are_enqueued(stack: LocalStack) -> None:
    small = [JobSpecification("noop", {"n": n}) for n in range(3)]
    huge = JobSpecification("noop", {"blob": "x" * (1024 * 1024)})
    # a producer not given the stack's payload bucket (with it, the params would go there)
    producer = Wiring(stack.declaration, clients=stack.clients, clock=stack.clock, queue_urls=stack.queue_urls)
    with pytest.raises(JobQueueError) as raised:
        producer.group().push([small[0], huge, *small[1:]])
    assert raised.value.failed_ids == (huge.id,)
    assert "a job may have (the SQS limit less 256 bytes" in raised.value.failed[0].message
    assert huge.id in str(raised.value)
    assert set(raised.value.enqueued_ids) == {s.id for s in small}
    assert {b["id"] for b in bodies(stack, "noop")} == {s.id for s in small}


def test_unknown_type_is_named_and_the_rest_are_enqueued(stack: LocalStack) -> None:
    good = JobSpecification("noop")
    bad = JobSpecification("noSuchType")
    with pytest.raises(JobQueueError) as raised:
        stack.queue_group().push([good, bad])
    assert raised.value.failed_ids == (bad.id,)
    assert raised.value.failed[0].code == "UnknownJobType"
    assert [b["id"] for b in bodies(stack, "noop")] == [good.id]


def test_failed_entries_are_retried(stack: LocalStack) -> None:
    specs = [JobSpecification("noop", {"n": n}) for n in range(5)]
    fault = FailBatchEntries(stack.sqs, lambda e: '"n":2' in e["MessageBody"], times=2)
    stack.queue_group().push(specs)
    assert fault.failed_entries == 2
    assert sorted(b["params"]["n"] for b in bodies(stack, "noop")) == [0, 1, 2, 3, 4]


def test_entries_failing_past_the_retry_limit_are_named(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    specs = [JobSpecification("noop", {"n": n}) for n in range(5)]
    FailBatchEntries(stack.sqs, lambda e: '"n":3' in e["MessageBody"])
    with pytest.raises(JobQueueError) as raised:
        stack.queue_group().push(specs)
    assert raised.value.failed_ids == (specs[3].id,)
    assert raised.value.failed[0].code == "InternalError"
    assert sqs_requests.calls["SendMessageBatch"] == 5  # max_send_attempts
    assert sorted(b["params"]["n"] for b in bodies(stack, "noop")) == [0, 1, 2, 4]


def test_sender_faults_are_not_retried(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    specs = [JobSpecification("noop", {"n": n}) for n in range(3)]
    FailBatchEntries(stack.sqs, lambda e: '"n":0' in e["MessageBody"], code="InvalidParameterValue", sender_fault=True)
    with pytest.raises(JobQueueError) as raised:
        stack.queue_group().push(specs)
    assert raised.value.failed_ids == (specs[0].id,)
    assert sqs_requests.calls["SendMessageBatch"] == 1


def test_throttled_batches_are_retried(stack: LocalStack) -> None:
    fault = FailCalls(stack.sqs, "sqs.SendMessageBatch", code="RequestThrottled", times=3)
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(4)])
    assert fault.failed_calls == 3
    assert len(bodies(stack, "noop")) == 4


def test_access_denied_fails_the_batch_at_once(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    FailCalls(stack.sqs, "sqs.SendMessageBatch", code="AccessDenied", status=403)
    specs = [JobSpecification("noop", {"n": n}) for n in range(2)]
    with pytest.raises(JobQueueError) as raised:
        stack.queue_group().push(specs)
    assert set(raised.value.failed_ids) == {s.id for s in specs}
    assert sqs_requests.calls["SendMessageBatch"] == 1


def test_queue_urls_are_looked_up_once(test_declaration: Any, stack: LocalStack) -> None:
    group = JobQueueGroup(declaration=test_declaration, sqs_client=stack.sqs, clock=stack.clock)
    counter = RequestCounter(stack.sqs)
    for _ in range(3):
        group.push(JobSpecification("noop"))
        group.for_domain("dewiki").push(JobSpecification("noop"))
    assert counter.calls == {"GetQueueUrl": 1, "SendMessageBatch": 6}


def test_delays_use_delay_seconds(stack: LocalStack) -> None:
    spec = JobSpecification("noop", delay=120)
    stack.queue_group().push(spec)
    assert bodies(stack, "noop") == []  # not visible yet
    stack.clock.advance(121)
    [body] = bodies(stack, "noop")
    assert body["releaseAt"] == pytest.approx(stack.clock.now() - 1)


def test_lazy_push_sends_nothing_until_flush(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    group = stack.queue_group()
    group.lazy_push([JobSpecification("noop", {"n": n}) for n in range(12)])
    assert sqs_requests.total == 0 and group.pending == 12
    group.flush()
    assert sqs_requests.calls == {"SendMessageBatch": 2}
    assert group.pending == 0
    assert len(bodies(stack, "noop")) == 12


def test_deferred_block_flushes_at_its_end_even_on_error(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    group = stack.queue_group()
    with pytest.raises(RuntimeError), group.deferred():
        group.lazy_push(JobSpecification("noop"))
        with group.deferred():
            group.lazy_push(JobSpecification("noop"))
        assert sqs_requests.total == 0  # the inner block does not flush
        raise RuntimeError("the request failed after deciding on the jobs")
    assert len(bodies(stack, "noop")) == 2


def test_flush_failure_is_raised_not_swallowed(stack: LocalStack, caplog: pytest.LogCaptureFixture) -> None:
    group = stack.queue_group()
    spec = JobSpecification("noSuchType", {"n": 1})
    group.lazy_push(spec)
    with pytest.raises(JobQueueError):
        group.flush()
    assert spec.id in caplog.text


def test_wsgi_middleware_flushes_after_the_response(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    group = stack.queue_group()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        group.lazy_push(JobSpecification("noop", {"path": environ["PATH_INFO"]}))
        start_response("200 OK", [])
        return [b"ok"]

    response = group.wsgi_middleware(app)({"PATH_INFO": "/edit"}, lambda *a: None)
    assert b"".join(response) == b"ok"
    assert sqs_requests.total == 0  # the body is out; the server has not closed it yet
    response.close()  # type: ignore[attr-defined]
    assert [b["params"] for b in bodies(stack, "noop")] == [{"path": "/edit"}]


def test_lambda_decorator_flushes_when_the_handler_returns(stack: LocalStack) -> None:
    group = stack.queue_group()

    @group.flush_after
    def handler(event: dict[str, Any], context: Any) -> str:
        group.lazy_push(JobSpecification("noop", event))
        return "done"

    assert handler({"n": 1}, None) == "done"
    assert [b["params"] for b in bodies(stack, "noop")] == [{"n": 1}]


def test_for_domain_shares_the_client_and_sets_the_domain(stack: LocalStack) -> None:
    group = stack.queue_group("enwiki")
    assert group.for_domain("dewiki") is group.for_domain("dewiki")
    group.for_domain("dewiki").push(JobSpecification("noop"))
    group.push(JobSpecification("noop", domain="frwiki"))  # an explicit domain wins
    assert sorted(b["domain"] for b in bodies(stack, "noop")) == ["dewiki", "frwiki"]


def test_default_groups_come_from_the_environment(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch, test_declaration: Any
) -> None:
    monkeypatch.setenv("JOBKIT_CONFIG", test_declaration.source)
    reset_default_groups()
    try:
        group = queue_group("enwiki")
        assert group is queue_group("enwiki")
        assert group.for_domain("dewiki") is queue_group("dewiki")
        group.push(JobSpecification("noop"))  # moto is active in-process: the default client reaches it
    finally:
        reset_default_groups()
    [body] = bodies(stack, "noop")
    assert body["domain"] == "enwiki"


def test_a_group_built_by_hand_needs_a_client(test_declaration: Any) -> None:
    with pytest.raises(TypeError, match="sqs_client, sqs_client_factory or transport"):
        JobQueueGroup("enwiki", declaration=test_declaration)


class ListTransport:
    """A push transport that keeps the batches it is sent, and refuses the first
    try of each message whose body contains ``refuse``."""

    def __init__(self, refuse: str) -> None:
        self.batches: list[list[Outgoing[Any]]] = []
        self._refuse = refuse
        self._refused: set[str] = set()

    def queue_url(self, job_type: str, priority: str | None = None) -> str:
        return f"queue:{job_type}"

    def send_batch(self, batch: Sequence[Outgoing[T]]) -> SendResult[T]:
        self.batches.append(list(batch))
        result: SendResult[T] = SendResult()
        for message in batch:
            if self._refuse in message.body and message.body not in self._refused:
                self._refused.add(message.body)
                result.failed.append(SendFailure(message, "InternalError", "try again", retryable=True))
            else:
                result.sent.append(message)
        return result


def test_a_group_sends_through_its_transport(test_declaration: Any) -> None:
    transport = ListTransport(refuse='"n":1')
    group = JobQueueGroup("enwiki", declaration=test_declaration, transport=transport, sleep=lambda _: None)
    specs = [JobSpecification("noop", {"n": n}) for n in range(3)] + [JobSpecification("dedup", {"n": 9})]
    assert group.push(specs) == [specs[0].id, specs[2].id, specs[3].id, specs[1].id]
    assert [[m.queue_url for m in batch] for batch in transport.batches] == [
        ["queue:noop"] * 3,
        ["queue:dedup"],
        ["queue:noop"],  # the refused entry, again
    ]
    attributes = transport.batches[0][0].attributes
    assert attributes["JobType"] == {"DataType": "String", "StringValue": "noop"}
    assert set(attributes) == {"JobType", "CorrelationId"}  # one correlation ID per push() call
    assert len({m.attributes["CorrelationId"]["StringValue"] for batch in transport.batches for m in batch}) == 1


def test_asgi_middleware_flushes_after_the_response(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    group = stack.queue_group()
    requests_when_sent: list[int] = []

    async def edit(request: Request) -> PlainTextResponse:
        group.lazy_push(JobSpecification("noop", {"path": request.url.path}))
        # Starlette runs a response's background task once the response is out.
        return PlainTextResponse("ok", background=BackgroundTask(lambda: requests_when_sent.append(sqs_requests.total)))

    app = group.asgi_middleware(Starlette(routes=[Route("/edit", edit, methods=["POST"])]))
    status, body = _serve_one(app, "POST", "/edit")
    assert (status, body) == (200, b"ok")
    assert requests_when_sent == [0]  # the response was out before the push
    assert [b["params"] for b in bodies(stack, "noop")] == [{"path": "/edit"}]


def test_asgi_middleware_flushes_after_a_failed_response(stack: LocalStack) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    group = stack.queue_group()

    async def broken(request: Request) -> None:
        group.lazy_push(JobSpecification("noop", {"path": request.url.path}))
        raise RuntimeError("the view failed after deciding on a job")

    app = group.asgi_middleware(Starlette(routes=[Route("/broken", broken)]))
    with pytest.raises(RuntimeError, match="view failed"):
        _serve_one(app, "GET", "/broken")
    assert [b["params"] for b in bodies(stack, "noop")] == [{"path": "/broken"}]


def test_asgi_requests_push_only_their_own_lazy_jobs(stack: LocalStack) -> None:
    import asyncio

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    group = stack.queue_group()
    in_queue_when_fast_done: list[list[str]] = []

    async def slow(request: Request) -> PlainTextResponse:
        group.lazy_push(JobSpecification("noop", {"path": "/slow"}))
        await release.wait()  # its transaction has not committed yet
        raise RuntimeError("the slow request failed after deciding on a job")

    async def fast(request: Request) -> PlainTextResponse:
        group.lazy_push(JobSpecification("noop", {"path": "/fast"}))
        return PlainTextResponse("ok")

    app = group.asgi_middleware(Starlette(routes=[Route("/slow", slow), Route("/fast", fast)]))

    async def both() -> None:
        slow_request = asyncio.create_task(_serve_one_async(app, "GET", "/slow"))
        await asyncio.sleep(0.05)
        await _serve_one_async(app, "GET", "/fast")
        in_queue_when_fast_done.append([b["params"]["path"] for b in bodies(stack, "noop")])
        release.set()
        with pytest.raises(RuntimeError, match="slow request failed"):
            await slow_request

    release = asyncio.Event()
    asyncio.run(both())
    assert in_queue_when_fast_done == [["/fast"]]  # not the slow request's job, which it had not finished
    assert [b["params"]["path"] for b in bodies(stack, "noop")] == ["/slow"]  # (bodies() took /fast already)


def test_wsgi_requests_on_two_threads_push_only_their_own_lazy_jobs(stack: LocalStack) -> None:
    import threading

    group = stack.queue_group()
    decided = threading.Event()
    release = threading.Event()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        group.lazy_push(JobSpecification("noop", {"path": environ["PATH_INFO"]}))
        if environ["PATH_INFO"] == "/slow":
            decided.set()
            release.wait(10)
        start_response("200 OK", [])
        return [b"ok"]

    wrapped = group.wsgi_middleware(app)

    def serve(path: str) -> None:
        response = wrapped({"PATH_INFO": path}, lambda *a: None)
        b"".join(response)
        response.close()  # type: ignore[attr-defined]

    slow = threading.Thread(target=serve, args=("/slow",))
    slow.start()
    assert decided.wait(10)
    serve("/fast")
    assert [b["params"]["path"] for b in bodies(stack, "noop")] == ["/fast"]
    release.set()
    slow.join(10)
    assert [b["params"]["path"] for b in bodies(stack, "noop")] == ["/slow"]  # (bodies() took /fast already)
