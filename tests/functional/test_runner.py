"""The runner on moto: attempts, partial batch failures, dead letters with
reasons, poison messages, delays and tear_down."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.local import LocalStack
from jobkit.local.esm import sqs_event

from testjobs import RUNS


def queue_url(stack: LocalStack, queue: str) -> str:
    return stack.queue_urls[stack.declaration.queue_name(queue)]


def queue_arn(stack: LocalStack, queue: str) -> str:
    return f"arn:aws:sqs:us-east-1:123456789012:{stack.declaration.queue_name(queue)}"


def receive(stack: LocalStack, queue: str, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        batch = stack.sqs.receive_message(
            QueueUrl=queue_url(stack, queue),
            MaxNumberOfMessages=min(10, count - len(messages)),
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        assert batch, f"expected {count} messages, got {len(messages)}"
        messages.extend(batch)
    return messages


def dead_letter_reasons(stack: LocalStack, queue: str) -> list[dict[str, str]]:
    return [
        {name: value["StringValue"] for name, value in m.get("MessageAttributes", {}).items()}
        for m in stack.dead_letters(queue)
    ]


def runs_of(job_id: str) -> list[str]:
    return [event for _, run_id, event in RUNS if run_id == job_id]


def test_a_job_that_always_fails_is_tried_max_attempts_times_then_dead_lettered(stack: LocalStack) -> None:
    spec = JobSpecification("alwaysFails", {"why": "a bug"})
    stack.queue_group().push(spec)
    stack.drain()
    assert runs_of(spec.id) == ["run", "tear_down:False"] * 3
    attempts = stack.results.attempts(spec.id)
    assert [r.attempt for r in attempts] == [1, 2, 3]
    assert [r.outcome for r in attempts] == [Outcome.RETRIED, Outcome.RETRIED, Outcome.DEAD_LETTERED]
    assert stack.queue_depth("alwaysFails") == 0
    [reason] = dead_letter_reasons(stack, "alwaysFails")
    assert reason["jobkit.reason"] == "attempts_exhausted"
    assert reason["jobkit.errorClass"] == "RuntimeError"
    assert reason["jobkit.error"] == "always fails (a bug)"
    assert reason["jobkit.attempts"] == "3"
    assert reason["JobType"] == "alwaysFails"


def test_retries_back_off_exponentially(stack: LocalStack) -> None:
    # Given a job that fails twice, then succeeds (max_attempts = 3)
    spec = JobSpecification("flaky", {"fail_times": 2})
    stack.queue_group().push(spec)
    stack.drain()
    # Then it succeeds on attempt 3, and the wait before each retry grows
    attempts = stack.results.attempts(spec.id)
    assert [(r.attempt, r.outcome) for r in attempts] == [
        (1, Outcome.RETRIED),
        (2, Outcome.RETRIED),
        (3, Outcome.SUCCEEDED),
    ]
    starts = [r.started_at or 0 for r in attempts]
    first_wait, second_wait = starts[1] - starts[0], starts[2] - starts[1]
    assert 5 <= first_wait <= 11  # base 10 s, half of it jittered
    assert 10 <= second_wait <= 21
    assert second_wait > first_wait


def test_exactly_the_failing_record_is_reported(stack: LocalStack) -> None:
    specs = [JobSpecification("flaky", {"fail_times": 0, "n": n}) for n in range(5)]
    failing = JobSpecification("flaky", {"fail_times": 9})
    stack.queue_group().push([*specs[:2], failing, *specs[2:]])
    messages = receive(stack, "flaky", 6)
    response = stack.runners["flaky"].handle(sqs_event(messages, queue_arn(stack, "flaky")), None)
    failing_message = next(m for m in messages if json.loads(m["Body"])["id"] == failing.id)
    assert response == {"batchItemFailures": [{"itemIdentifier": failing_message["MessageId"]}]}


def test_run_returning_false_is_a_failure(stack: LocalStack) -> None:
    spec = JobSpecification("returnsFalse")
    stack.queue_group().push(spec)
    stack.drain()
    assert [r.outcome for r in stack.results.attempts(spec.id)][-1] is Outcome.DEAD_LETTERED
    [reason] = dead_letter_reasons(stack, "returnsFalse")
    assert reason["jobkit.errorClass"] == "JobFailed"
    assert "returned False" in reason["jobkit.error"]


@pytest.mark.parametrize(
    ("job_type", "error_class", "message"),
    [("noRetries", "ValueError", "bad input"), ("permanent", "NonRetryableError", "account was deleted")],
)
def test_a_job_that_may_not_retry_is_dead_lettered_after_one_attempt(
    stack: LocalStack, job_type: str, error_class: str, message: str
) -> None:
    spec = JobSpecification(job_type)
    stack.queue_group().push(spec)
    stack.drain()
    assert runs_of(spec.id) == ["run", "tear_down:False"]
    [reason] = dead_letter_reasons(stack, job_type)
    assert reason["jobkit.reason"] == "non_retryable"
    assert reason["jobkit.errorClass"] == error_class
    assert message in reason["jobkit.error"]


def test_each_type_keeps_its_own_attempt_limit_on_a_shared_queue(stack: LocalStack) -> None:
    # The lowTraffic queue's maxReceiveCount is 5 (rarer's); rare allows 2.
    spec = JobSpecification("rare")
    stack.queue_group().push(spec)
    stack.drain()
    assert len(stack.results.attempts(spec.id)) == 2
    [reason] = dead_letter_reasons(stack, "lowTraffic")
    assert reason["jobkit.attempts"] == "2"


POISON = {
    "not json": "{this is not json",
    "wrong version": json.dumps({"v": 9, "id": "x", "type": "noop", "params": {}, "enqueuedAt": 1}),
    "missing fields": json.dumps({"v": 1, "type": "noop"}),
    "wrong types": json.dumps({"v": 1, "id": "x", "type": "noop", "params": "p", "enqueuedAt": 1}),
    "unknown type": json.dumps({"v": 1, "id": "x", "type": "nope", "params": {}, "enqueuedAt": 1}),
    "type naming a module": json.dumps({"v": 1, "id": "x", "type": "os:system", "params": {}, "enqueuedAt": 1}),
    "class does not resolve": json.dumps({"v": 1, "id": "x", "type": "broken", "params": {}, "enqueuedAt": 1}),
}


@pytest.mark.parametrize("body", POISON.values(), ids=POISON.keys())
def test_a_poison_message_is_dead_lettered_alone(stack: LocalStack, body: str) -> None:
    # Given a batch of 10 on one queue, one of them poison
    good = [JobSpecification("noop", {"n": n}) for n in range(9)]
    stack.queue_group().push(good[:4])
    stack.sqs.send_message(QueueUrl=queue_url(stack, "noop"), MessageBody=body)
    stack.queue_group().push(good[4:])
    # When the runner gets the whole batch at once
    messages = receive(stack, "noop", 10)
    response = stack.runners["noop"].handle(sqs_event(messages, queue_arn(stack, "noop")), None)
    # Then the nine run, and the poison message is in the DLQ with the reason
    assert response == {"batchItemFailures": []}
    assert {run_id for _, run_id, event in RUNS if event == "run"} == {s.id for s in good}
    [dead] = stack.dead_letters("noop")
    assert dead["Body"] == body
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes["jobkit.reason"] == "poison"
    assert attributes["jobkit.errorClass"] in {"SpecError", "UnknownJobType", "JobClassError"}
    assert len(attributes["jobkit.error"]) > 10
    # and the original is gone from the queue once the batch's successes are deleted
    for message in messages:
        if message["Body"] != body:
            stack.sqs.delete_message(QueueUrl=queue_url(stack, "noop"), ReceiptHandle=message["ReceiptHandle"])
    assert stack.queue_depth("noop") == 0


def test_a_far_future_job_hops_until_released_without_using_attempts(stack: LocalStack) -> None:
    # Given a job released two hours ahead (beyond SQS's 15-minute delay limit)
    release = stack.clock.now() + 2 * 3600
    spec = JobSpecification("noop", release_at=release)
    stack.queue_group().push(spec)
    # When time runs to one second before the release
    stack.drain(until=release - 1)
    # Then it has not run, only hopped
    assert runs_of(spec.id) == []
    hops = [r for r in stack.results.results if r.job_id == spec.id]
    assert hops and all(r.outcome is Outcome.DELAYED for r in hops)
    # And after the release it runs once, on its first attempt
    stack.drain()
    [run] = stack.results.attempts(spec.id)
    assert run.outcome is Outcome.SUCCEEDED and run.attempt == 1
    assert run.started_at is not None and run.started_at >= release
    assert run.pickup_delay_ms is not None and run.pickup_delay_ms < 1000


def test_tear_down_runs_once_per_attempt(stack: LocalStack) -> None:
    spec = JobSpecification("flaky", {"fail_times": 1})
    stack.queue_group().push(spec)
    stack.drain()
    assert runs_of(spec.id) == ["run", "tear_down:False", "run", "tear_down:True"]


def test_jobs_push_jobs_through_their_context(stack: LocalStack) -> None:
    root = JobSpecification("fanOut", {"leaves": 25, **new_root_job_params("fan", stack.clock.now())}, domain="enwiki")
    stack.queue_group().push(root)
    stack.drain()
    leaves = [r for r in stack.results.of_type("fanOut") if r.job_id != root.id]
    assert len(leaves) == 25 and all(r.outcome is Outcome.SUCCEEDED for r in leaves)
    assert {r.domain for r in leaves} == {"enwiki"}


def test_pickup_delay_is_measured_from_the_enqueue_time(stack: LocalStack) -> None:
    spec = JobSpecification("noop")
    stack.queue_group().push(spec)
    stack.clock.advance(42)
    stack.drain()
    [run] = stack.results.attempts(spec.id)
    assert run.pickup_delay_ms == pytest.approx(42_000)
