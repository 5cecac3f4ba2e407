"""The event source mapping emulator behaves like Lambda's poller."""

from __future__ import annotations

from typing import Any

from jobkit import JobSpecification
from jobkit.local import EventSourceMapping, LocalStack


def mapping(stack: LocalStack, handler: Any, batch_size: int = 10) -> EventSourceMapping:
    name = stack.declaration.queue_name("noop")
    return EventSourceMapping(
        stack.sqs,
        stack.queue_urls[name],
        f"arn:aws:sqs:us-east-1:123456789012:{name}",
        handler,
        batch_size=batch_size,
        clock=stack.clock,
    )


def push(stack: LocalStack, count: int) -> None:
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(count)])


def test_batches_fill_up_to_batch_size_across_receives(stack: LocalStack) -> None:
    push(stack, 25)
    sizes: list[int] = []
    esm = mapping(stack, lambda event, ctx: sizes.append(len(event["Records"])), batch_size=20)
    while esm.poll():
        pass
    assert sizes == [20, 5]
    assert stack.queue_depth("noop") == 0  # a None response means success: all deleted


def test_receive_count_grows_with_each_delivery(stack: LocalStack) -> None:
    push(stack, 1)
    counts: list[str] = []

    def fail_all(event: dict[str, Any], context: Any) -> dict[str, Any]:
        record = event["Records"][0]
        counts.append(record["attributes"]["ApproximateReceiveCount"])
        return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}

    esm = mapping(stack, fail_all)
    for _ in range(3):
        esm.poll()
        stack.clock.advance(stack.declaration.queues["noop"].visibility_timeout_s + 1)
    assert counts == ["1", "2", "3"]


def test_a_raising_handler_returns_the_whole_batch(stack: LocalStack) -> None:
    push(stack, 3)

    def crash(event: dict[str, Any], context: Any) -> None:
        raise RuntimeError("handler crashed")

    assert mapping(stack, crash).poll() == 3
    assert stack.queue_depth("noop") == 3


def test_an_unknown_item_identifier_fails_the_whole_batch(stack: LocalStack) -> None:
    push(stack, 3)
    esm = mapping(stack, lambda event, ctx: {"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]})
    esm.poll()
    assert stack.queue_depth("noop") == 3


def test_context_counts_down_on_the_clock(stack: LocalStack) -> None:
    push(stack, 1)
    remaining: list[int] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        remaining.append(context.get_remaining_time_in_millis())
        stack.clock.advance(10)
        remaining.append(context.get_remaining_time_in_millis())

    mapping(stack, handler).poll()
    assert remaining == [60_000, 50_000]


def test_redrive_moves_a_message_past_max_receive_count(stack: LocalStack) -> None:
    # SQS itself (moto) moves a message to the DLQ on the receive after maxReceiveCount.
    push(stack, 1)
    esm = mapping(
        stack, lambda event, ctx: {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    )
    for _ in range(3):
        assert esm.poll() == 1
        stack.clock.advance(stack.declaration.queues["noop"].visibility_timeout_s + 1)
    assert esm.poll() == 0
    assert stack.queue_depth("noop") == 0
    assert stack.queue_depth("noop", dlq=True) == 1


def test_the_stack_can_serve_on_a_loopback_port(test_declaration: Any) -> None:
    import boto3

    with LocalStack(test_declaration, server=True) as stack:
        assert stack.endpoint_url is not None and stack.endpoint_url.startswith("http://127.0.0.1:")
        # another client (as another process would) reaches it by its endpoint
        client = boto3.client("sqs", region_name="us-east-1", endpoint_url=stack.endpoint_url)
        url = client.get_queue_url(QueueName="test-noop")["QueueUrl"]
        client.send_message(QueueUrl=url, MessageBody=JobSpecification("noop").stamped(0).to_message())
        stack.drain()
        assert [r.outcome.value for r in stack.results.results] == ["succeeded"]
