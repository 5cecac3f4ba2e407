"""A batch's claims go out together and its settles in the background: a
batch of 10 waits through 2 round trips to DynamoDB, not 20, for the same
requests and the same outcomes as one job at a time.

Round trips are counted on a modelled latency (see ``latency.py``): the longest
chain of requests each sent after the one before returned. Nothing is timed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobkit import JobSpecification
from jobkit.local import LocalStack
from jobkit.outcome import Outcome

from conftest import RequestCounter
from faults import FailCalls
from latency import ModelledLatency
from test_dedup_costs import delivered

LATENCY_S = 0.2  # long beside the scheduling noise of a busy machine, so the count is stable


@pytest.fixture
def latency(stack: LocalStack) -> Iterator[ModelledLatency]:
    modelled = ModelledLatency(stack.dynamodb, LATENCY_S)
    yield modelled
    modelled.remove()


@pytest.mark.parametrize(("job_type", "params"), [("dedup", "title"), ("once", "to")])
def test_a_batch_of_ten_claims_and_settles_in_two_round_trips(
    stack: LocalStack, latency: ModelledLatency, dynamodb_requests: RequestCounter, job_type: str, params: str
) -> None:
    stack.queue_group().push([JobSpecification(job_type, {params: f"page {n}"}) for n in range(10)])
    stack.clock.advance(1)
    event = delivered(stack, job_type, 10)
    dynamodb_requests.reset()
    latency.reset()
    results = stack.runners[job_type].process(event)
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED] * 10
    assert dynamodb_requests.calls == {"UpdateItem": 20}  # a claim and a settle each, as one at a time
    assert latency.round_trips() == 2


def test_twins_in_one_batch_are_admitted_in_turn_after_the_first_settled(
    stack: LocalStack, latency: ModelledLatency, dynamodb_requests: RequestCounter
) -> None:
    # Given ten identical remove_duplicates jobs in one batch
    stack.queue_group().push([JobSpecification("dedup", {"title": "A", "cause": n}) for n in range(10)])
    stack.clock.advance(1)
    event = delivered(stack, "dedup", 10)
    dynamodb_requests.reset()
    results = stack.runners["dedup"].process(event)
    # Then the first runs, and each other one, claiming after its settle, is its duplicate
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED] + [Outcome.DUPLICATE] * 9
    assert dynamodb_requests.calls == {"UpdateItem": 11}


def test_a_job_delivered_twice_in_one_batch_runs_once(stack: LocalStack) -> None:
    spec = JobSpecification("once", {"to": "x"})
    stack.queue_group().push(spec)
    [record] = delivered(stack, "once", 1)["Records"]
    twin = {**record, "messageId": "a-second-delivery"}
    results = stack.runners["once"].process({"Records": [record, twin]})
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED, Outcome.REDELIVERED]


def test_a_settle_that_fails_is_counted_at_the_end_of_the_batch(stack: LocalStack) -> None:
    # Given a store that takes claims but cannot settle them (a release removes the owner)
    FailCalls(
        stack.dynamodb,
        "dynamodb.UpdateItem",
        code="ThrottlingException",
        match=lambda params: "REMOVE" in params.get("UpdateExpression", ""),
    )
    stack.queue_group().push([JobSpecification("dedup", {"title": f"page {n}"}) for n in range(3)])
    stack.clock.advance(1)
    stack.drain()
    # Then the jobs ran, and the outage is in their results (and so in the metric)
    results = stack.results.results
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED] * 3
    assert [r.dedup_unavailable for r in results] == [True] * 3
