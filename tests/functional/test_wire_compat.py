"""The wire format's compatibility rule, end to end on the local stack.

A producer may add an optional field without a new version: a runner that does
not know it runs the job, and keeps the field in the body wherever the body
goes (a delay hop, a retry, the DLQ, a redrive). A newer major version is
refused as poison, with a reason that says what to do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.errors import SpecError
from jobkit.local import LocalStack
from jobkit.sqs import TYPE_ATTRIBUTE, string_attribute

from testjobs import RUNS


def send(stack: LocalStack, job_type: str, body: dict[str, Any]) -> None:
    queue = stack.declaration.types[job_type].queue
    stack.sqs.send_message(
        QueueUrl=stack.queue_url(queue),
        MessageBody=json.dumps(body),
        MessageAttributes={TYPE_ATTRIBUTE: string_attribute(job_type)},
    )


def newer_body(job_type: str, **fields: Any) -> dict[str, Any]:
    """A body from a newer producer: v1, with a field this runner does not know."""
    body = json.loads(JobSpecification(job_type, {"n": 1}).stamped(fields.pop("now")).to_message())
    return {**body, "traceId": "4bf92f3577b34da6a3ce929d0e0736", **fields}


def test_a_field_this_runner_does_not_know_is_ignored_and_kept_through_a_delay_hop(stack: LocalStack) -> None:
    now = stack.clock.now()
    send(stack, "noop", newer_body("noop", now=now, releaseAt=now + 30))
    stack.poll_once()  # not released yet: re-enqueued, as it came
    hopped = stack.sqs.receive_message(
        QueueUrl=stack.queue_url(stack.declaration.types["noop"].queue), VisibilityTimeout=0
    )
    assert hopped.get("Messages") is None  # on its delay
    stack.clock.advance(31)
    stack.drain()
    assert [(job_type, what) for job_type, _, what in RUNS if what == "run"] == [("noop", "run")]
    delayed = [r for r in stack.results.results if r.outcome.value == "delayed"]
    assert len(delayed) == 1


def test_a_field_this_runner_does_not_know_reaches_the_dlq_unchanged(stack: LocalStack) -> None:
    body = newer_body("noRetries", now=stack.clock.now())
    send(stack, "noRetries", body)
    stack.drain()
    (dead,) = stack.dead_letters(stack.declaration.types["noRetries"].queue)
    assert json.loads(dead["Body"])["traceId"] == body["traceId"]
    assert dead["MessageAttributes"]["jobkit.reason"]["StringValue"] == "non_retryable"


def test_a_newer_major_version_is_poison_with_the_reason_and_never_runs(stack: LocalStack) -> None:
    body = {**newer_body("noop", now=stack.clock.now()), "v": 4}
    send(stack, "noop", body)
    stack.drain()
    assert RUNS == []
    (dead,) = stack.dead_letters(stack.declaration.types["noop"].queue)
    attributes = dead["MessageAttributes"]
    assert attributes["jobkit.reason"]["StringValue"] == "poison"
    assert "wire version 4 is newer than this runner reads (v3)" in attributes["jobkit.error"]["StringValue"]
    assert json.loads(dead["Body"]) == body  # kept whole, for a redrive once the runners read v4


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"params": {"x": 1e400}}, "too large for a double"),
        ({"v": 1.0}, "unsupported wire version 1.0"),
        ({"v": True}, "unsupported wire version True"),
    ],
    ids=["a number that would be infinity", "v as a float", "v as a boolean"],
)
def test_what_json_readers_disagree_on_is_poison(fields: dict[str, Any], reason: str) -> None:
    data = {"v": 1, "id": "j", "type": "noop", "params": {}, "enqueuedAt": 1.0, **fields}
    text = json.dumps(data).replace("1e+400", "1e400").replace("Infinity", "1e400")
    with pytest.raises(SpecError, match=reason):
        JobSpecification.from_message(text)
