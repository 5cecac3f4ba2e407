"""What de-duplication costs, in AWS requests per job (the figures of docs/benchmarks.md):

- a plain job: 0 DynamoDB requests, and no SQS request beyond the event source mapping's;
- a remove_duplicates job: 2 DynamoDB writes when it runs, 1 request when it is a duplicate;
- a leaf in a 10,000-leaf fan-out: at most 0.1 DynamoDB requests, amortised.

These count requests; they time nothing.
"""

from __future__ import annotations

from typing import Any

from jobkit import JobSpecification
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.local import LocalStack
from jobkit.local.esm import sqs_event as received_event
from jobkit.testing import sqs_event

from conftest import RequestCounter


def delivered(stack: LocalStack, queue: str, count: int) -> dict[str, Any]:
    url = stack.queue_urls[stack.declaration.queue_name(queue)]
    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        messages += stack.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
    return received_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{stack.declaration.queue_name(queue)}")


def test_a_plain_job_costs_no_request_beyond_the_event_source_mapping(
    stack: LocalStack, sqs_requests: RequestCounter, dynamodb_requests: RequestCounter
) -> None:
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(10)])
    event = delivered(stack, "noop", 10)
    sqs_requests.reset()
    results = stack.runners["noop"].process(event)
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED] * 10
    assert dynamodb_requests.total == 0
    assert sqs_requests.total == 0


def test_a_remove_duplicates_job_costs_two_writes_when_it_runs_and_one_request_as_a_duplicate(
    stack: LocalStack, dynamodb_requests: RequestCounter
) -> None:
    stack.queue_group().push([JobSpecification("dedup", {"title": "A"}) for _ in range(2)])
    stack.clock.advance(1)
    event = delivered(stack, "dedup", 2)
    runner = stack.runners["dedup"]
    first = runner.process({"Records": event["Records"][:1]})
    assert [r.outcome for r in first] == [Outcome.SUCCEEDED]
    assert dynamodb_requests.calls == {"UpdateItem": 2}  # claim, then release with the success
    dynamodb_requests.reset()
    second = runner.process({"Records": event["Records"][1:]})
    assert [r.outcome for r in second] == [Outcome.DUPLICATE]
    assert dynamodb_requests.calls == {"UpdateItem": 1}  # the losing claim says what it lost to


def test_a_deliver_once_job_costs_two_writes(stack: LocalStack, dynamodb_requests: RequestCounter) -> None:
    stack.queue_group().push(JobSpecification("once"))
    stack.runners["once"].process(delivered(stack, "once", 1))
    assert dynamodb_requests.calls == {"UpdateItem": 2}


def test_a_leaf_of_a_10000_leaf_fan_out_costs_under_a_tenth_of_a_request(
    stack: LocalStack, dynamodb_requests: RequestCounter
) -> None:
    # Given a root job's 10,000 leaves, run by 8 containers in batches of 10,
    # 2 ms of (virtual) time per leaf: 20 s in all
    queue_arn = "arn:aws:sqs:us-east-1:123456789012:test-fanOut"
    containers = [stack.wiring.runner("fanOut") for _ in range(8)]
    key = "htmlCacheUpdate:templatelinks:Template:Infobox"
    root = JobSpecification("fanOut", {"leaves": 10_000, **new_root_job_params(key, stack.clock.now())})
    stack.queue_group().push(root)
    leaves = [
        JobSpecification("fanOut", {"n": n, **root.root_job_params()}).stamped(stack.clock.now()) for n in range(10_000)
    ]
    dynamodb_requests.reset()
    outcomes: list[Outcome] = []
    for batch_number, start in enumerate(range(0, 10_000, 10)):
        event = sqs_event(leaves[start : start + 10], queue_arn=queue_arn)
        outcomes += [r.outcome for r in containers[batch_number % 8].process(event)]
        stack.clock.advance(0.02)
    # Then every leaf ran, for well under 0.1 DynamoDB requests each
    assert outcomes == [Outcome.SUCCEEDED] * 10_000
    per_leaf = dynamodb_requests.total / 10_000
    print(f"fan-out: {dynamodb_requests.total} DynamoDB requests for 10,000 leaves")
    assert per_leaf <= 0.1, per_leaf
    assert dynamodb_requests.total <= 8 * 3  # one look per container per 15 s cache window


def test_old_leaves_stop_running_within_the_cache_window_of_a_new_root(
    stack: LocalStack, dynamodb_requests: RequestCounter
) -> None:
    # Given containers that have cached root A as the newest
    queue_arn = "arn:aws:sqs:us-east-1:123456789012:test-fanOut"
    runner = stack.runners["fanOut"]
    key = "k"
    root_a = JobSpecification("fanOut", new_root_job_params(key, stack.clock.now()))
    leaf_a = [JobSpecification("fanOut", {"n": n, **root_a.root_job_params()}) for n in range(40)]
    stamped = [leaf.stamped(stack.clock.now()) for leaf in leaf_a]
    first = runner.process(sqs_event(stamped[:10], queue_arn=queue_arn))
    assert {r.outcome for r in first} == {Outcome.SUCCEEDED}
    # When a newer root A' is recorded elsewhere (another container, the push SDK)
    stack.clock.advance(1)
    stack.queue_group().deduplicate_root_job(JobSpecification("fanOut", new_root_job_params(key, stack.clock.now())))
    # Then A's leaves may still run while the cache entry is fresh (15 s) ...
    within = runner.process(sqs_event(stamped[10:20], queue_arn=queue_arn))
    assert {r.outcome for r in within} == {Outcome.SUCCEEDED}
    # ... and are superseded once it is not: one request, then from the cache
    stack.clock.advance(15)
    dynamodb_requests.reset()
    after = runner.process(sqs_event(stamped[20:], queue_arn=queue_arn))
    assert {r.outcome for r in after} == {Outcome.SUPERSEDED}
    assert dynamodb_requests.total == 1
