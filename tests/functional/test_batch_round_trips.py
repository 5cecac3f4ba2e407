"""A batch's claims go out together and its settles in the background: a
batch of 10 remove_duplicates jobs waits through 2 round trips to DynamoDB,
not 20, for the same requests and the same outcomes as one job at a time. A
deliver_once job's "done" lands before the next job starts (a job that kills
the invocation must not make it run again): 1 + 10 round trips.

Round trips are counted on a modelled latency (see ``latency.py``): the longest
chain of requests each sent after the one before returned. Nothing is timed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from jobkit import JobSpecification
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.local import LocalStack

from conftest import START, RequestCounter
from faults import FailCalls
from latency import ModelledLatency
from test_dedup_costs import delivered
from testjobs import RUNS

LATENCY_S = 0.2  # long beside the scheduling noise of a busy machine, so the count is stable
# Settles start as their jobs end: they overlap in one round trip only while the
# batch's ten jobs take less than one, so that case models a longer one.
SETTLE_LATENCY_S = 1.0


@pytest.fixture
def latency(stack: LocalStack) -> Iterator[ModelledLatency]:
    modelled = ModelledLatency(stack.dynamodb, LATENCY_S)
    yield modelled
    modelled.remove()


@pytest.mark.parametrize(
    ("job_type", "params", "round_trips", "seconds"),
    [("dedup", "title", 2, SETTLE_LATENCY_S), ("once", "to", 11, LATENCY_S)],
)
def test_a_batch_of_ten_claims_together(
    stack: LocalStack,
    latency: ModelledLatency,
    dynamodb_requests: RequestCounter,
    job_type: str,
    params: str,
    round_trips: int,
    seconds: float,
) -> None:
    stack.queue_group().push([JobSpecification(job_type, {params: f"page {n}"}) for n in range(10)])
    stack.clock.advance(1)
    event = delivered(stack, job_type, 10)
    dynamodb_requests.reset()
    latency.reset()
    latency.seconds = seconds
    results = stack.runners[job_type].process(event)
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED] * 10
    assert dynamodb_requests.calls == {"UpdateItem": 20}  # a claim and a settle each, as one at a time
    assert latency.round_trips() == round_trips


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


def test_one_jobs_bug_in_its_dedup_hooks_fails_that_job_alone(stack: LocalStack) -> None:
    from jobkit.declaration.config import parse_declaration

    declaration = parse_declaration(
        {"types": {"picky": {"class": "testjobs:UnhashableJob", "remove_duplicates": True}}}, source="test"
    )
    with LocalStack(declaration, clock=stack.clock) as picky:
        specs = [
            JobSpecification("picky", {"n": 1}),
            JobSpecification("picky", {"bad": True}),
            JobSpecification("picky", {"n": 3}),
        ]
        picky.queue_group().push(specs)
        picky.clock.advance(1)
        event = delivered(picky, "picky", 3)
        by_id = {r.job_id or r.message_id: r.outcome for r in picky.runners["picky"].process(event)}
        message_of = {json.loads(r["body"])["id"]: r["messageId"] for r in event["Records"]}
        assert by_id[specs[0].id] is Outcome.SUCCEEDED and by_id[specs[2].id] is Outcome.SUCCEEDED
        assert by_id[message_of[specs[1].id]] is Outcome.RETRIED  # an internal error: retried, then dead-lettered


def test_a_deliver_once_job_is_marked_done_before_the_next_job_starts(stack: LocalStack) -> None:
    # If the next job killed the invocation, the first must not run again on redelivery.
    first, second = JobSpecification("once", {"to": "a"}), JobSpecification("once", {"to": "b"})
    stack.queue_group().push([first, second])
    event = delivered(stack, "once", 2)

    def mark(params: dict[str, object], **_: object) -> None:
        if "REMOVE" in str(params.get("UpdateExpression", "")):  # "done" drops the lease
            RUNS.append(("once", "", "marked done"))

    stack.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem", mark)
    RUNS.clear()
    stack.runners["once"].process(event)
    order = [event for _, _, event in RUNS]
    assert order.index("marked done") < order.index("run", order.index("run") + 1), RUNS


def test_jobs_linked_through_a_third_are_admitted_in_turn(stack: LocalStack) -> None:
    # A and B share a root; B and C share a dedup hash (root params are not hashed)
    root = new_root_job_params("k", START)
    leaf = {k: v for k, v in root.items() if k != "rootJobIsSelf"}
    a = JobSpecification("dedup", {"title": "Z", **leaf})
    b = JobSpecification("dedup", {"title": "A", **leaf})
    c = JobSpecification("dedup", {"title": "A"})
    stack.queue_group().push([a, b, c])
    stack.clock.advance(1)
    event = delivered(stack, "dedup", 3)
    order = {json.loads(r["body"])["id"]: n for n, r in enumerate(event["Records"])}
    event = {"Records": sorted(event["Records"], key=lambda r: [a.id, b.id, c.id].index(json.loads(r["body"])["id"]))}
    assert sorted(order) == sorted([a.id, b.id, c.id])
    results = stack.runners["dedup"].process(event)
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED, Outcome.DUPLICATE]


def test_the_runners_own_results_show_a_settle_that_failed(stack: LocalStack) -> None:
    FailCalls(
        stack.dynamodb,
        "dynamodb.UpdateItem",
        code="ThrottlingException",
        match=lambda params: "REMOVE" in params.get("UpdateExpression", ""),
    )
    stack.queue_group().push([JobSpecification("dedup", {"title": f"page {n}"}) for n in range(2)])
    stack.clock.advance(1)
    results = stack.runners["dedup"].process(delivered(stack, "dedup", 2))
    assert [(r.outcome, r.dedup_unavailable) for r in results] == [(Outcome.SUCCEEDED, True)] * 2
