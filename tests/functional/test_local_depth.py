"""The local stack at depth: with thousands of messages queued, SQS still
answers what it should (counts, visibility, delays, retention, redrive), and
the stack's own questions (anything to receive? when does the next hidden
message come back?) get the right answers. Everything goes through boto3."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobkit import JobSpecification
from jobkit.local import LocalStack

DEPTH = 3_000
COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed")


def send(stack: LocalStack, bodies: Sequence[str], *, delay: int = 0, queue: str = "noop") -> None:
    url = stack.queue_url(queue)
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(i), "MessageBody": body, "DelaySeconds": delay}
            for i, body in enumerate(bodies[start : start + 10])
        ]
        stack.sqs.send_message_batch(QueueUrl=url, Entries=entries)


def receive(stack: LocalStack, count: int = 10, *, visibility: int = 30, queue: str = "noop") -> list[Any]:
    response = stack.sqs.receive_message(
        QueueUrl=stack.queue_url(queue),
        MaxNumberOfMessages=count,
        VisibilityTimeout=visibility,
        MessageSystemAttributeNames=["ApproximateReceiveCount"],
    )
    return list(response.get("Messages", []))


def receive_all(stack: LocalStack, *, visibility: int = 30, queue: str = "noop") -> list[Any]:
    messages: list[Any] = []
    while batch := receive(stack, visibility=visibility, queue=queue):
        messages += batch
    return messages


def counts(stack: LocalStack, queue: str = "noop") -> tuple[int, int, int]:
    attributes = stack.sqs.get_queue_attributes(QueueUrl=stack.queue_url(queue), AttributeNames=list(COUNTS))
    visible, in_flight, delayed = (int(attributes["Attributes"][name]) for name in COUNTS)
    return visible, in_flight, delayed


def bodies(messages: Sequence[Any]) -> list[str]:
    return [message["Body"] for message in messages]


def test_the_counts_are_exact_at_depth(stack: LocalStack) -> None:
    send(stack, [f"now {n}" for n in range(DEPTH)])
    send(stack, [f"later {n}" for n in range(500)], delay=60)
    received = [m for _ in range(30) for m in receive(stack)]
    assert counts(stack) == (DEPTH - 300, 300, 500)
    assert stack.queue_depth("noop") == DEPTH + 500

    stack.clock.advance(30.001)  # the 300 are visible again
    assert counts(stack) == (DEPTH, 0, 500)
    stack.clock.advance(30)  # and the delayed ones are released
    assert counts(stack) == (DEPTH + 500, 0, 0)

    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received[:10])]
    assert len(stack.sqs.delete_message_batch(QueueUrl=stack.queue_url("noop"), Entries=entries)["Successful"]) == 10
    assert counts(stack) == (DEPTH + 490, 0, 0)


def test_received_messages_stay_hidden_until_their_timeout_at_depth(stack: LocalStack) -> None:
    send(stack, [f"m{n}" for n in range(DEPTH)])
    first = receive(stack, visibility=30)
    assert bodies(first) == [f"m{n}" for n in range(10)]
    assert bodies(receive(stack)) == [f"m{n}" for n in range(10, 20)]  # the first ten are in flight

    url = stack.queue_url("noop")
    stack.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[3]["ReceiptHandle"], VisibilityTimeout=0)
    stack.clock.advance(0.001)
    assert bodies(receive(stack, 2)) == ["m3", "m20"]  # back at its place in the queue

    stack.clock.advance(30)
    again = receive(stack)
    assert bodies(again) == ["m0", "m1", "m2", *(f"m{n}" for n in range(4, 11))]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}


def test_the_stack_knows_when_a_deep_queue_has_something_to_receive(stack: LocalStack) -> None:
    send(stack, [f"m{n}" for n in range(DEPTH)])
    send(stack, ["delayed"], delay=90)
    start = stack.clock.now()
    for visibility in (50, 40):  # the first half hidden for 50 s, the rest for 40 s
        for _ in range(DEPTH // 20):
            receive(stack, visibility=visibility)
    assert counts(stack) == (0, DEPTH, 1)

    assert stack.poll_once() == 0  # nothing to receive: no job runs
    wake = stack.next_wakeup()
    assert wake is not None and abs(wake - (start + 40)) < 0.001
    stack.clock.advance_to(wake)
    assert receive(stack) == []  # moto shows a message once the clock has passed its visible_at
    stack.clock.advance(0.002)
    assert bodies(receive(stack, 1, visibility=600)) == [f"m{DEPTH // 2}"]

    stack.clock.advance_to(start + 50.002)
    assert len(receive_all(stack, visibility=600)) == DEPTH - 1
    wake = stack.next_wakeup()
    assert wake is not None and abs(wake - (start + 90)) < 0.001
    stack.clock.advance_to(wake + 0.001)
    assert bodies(receive(stack)) == ["delayed"]
    assert stack.next_wakeup() is not None  # everything is in flight now, for 600 s


def test_messages_past_their_retention_are_never_received_at_depth(stack: LocalStack) -> None:
    url = stack.queue_url("noop")
    stack.sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
    send(stack, [f"old {n}" for n in range(20)])
    stack.clock.advance(61)
    send(stack, [f"new {n}" for n in range(DEPTH)])

    received: list[str] = []
    for _ in range(DEPTH // 10 + 40):
        received += bodies(receive(stack, visibility=600))
    assert sorted(received) == sorted(f"new {n}" for n in range(DEPTH))


def test_a_message_goes_to_the_dlq_at_its_max_receive_count_at_depth(stack: LocalStack) -> None:
    send(stack, [f"m{n}" for n in range(DEPTH)])
    url = stack.queue_url("noop")
    limit = stack.declaration.queues["noop"].max_receive_count
    for attempt in range(1, limit + 1):
        message = receive(stack, 1)[0]
        assert (message["Body"], message["Attributes"]["ApproximateReceiveCount"]) == ("m0", str(attempt))
        stack.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
        stack.clock.advance(0.001)
    assert bodies(receive(stack, 1)) == ["m1"]  # m0 was past its limit: moved, not received
    assert stack.queue_depth("noop", dlq=True) == 1
    assert stack.queue_depth("noop") == DEPTH - 1
    dead = stack.sqs.receive_message(QueueUrl=stack.queue_url("noop", dlq=True))["Messages"]
    assert bodies(dead) == ["m0"]


def test_a_deep_queue_drains_to_the_last_job(stack: LocalStack) -> None:
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(DEPTH)])
    stack.queue_group().push([JobSpecification("noop", {"n": "delayed"}, delay=600)])
    assert stack.drain() == DEPTH + 1
    assert sum(1 for result in stack.results.results if result.ran) == DEPTH + 1
    assert stack.queue_depth("noop") == 0
