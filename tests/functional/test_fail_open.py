"""A dedup-store outage never stalls or loses jobs: they run, and it is counted."""

from __future__ import annotations

import io
import json
import logging

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration
from jobkit.local import LocalStack

from conftest import START
from faults import FailCalls


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"]
)
def test_jobs_run_when_dynamodb_is_throttled(test_declaration: Declaration, code: str) -> None:
    emf = io.StringIO()
    with LocalStack(test_declaration, clock=VirtualClock(START), emf_stream=emf) as stack:
        # Given every DynamoDB call fails
        fault = FailCalls(stack.dynamodb, "dynamodb.*", code=code, status=400 if "Exceeded" in code else 500)
        specs = [
            JobSpecification("dedup", {"title": "A"}),
            JobSpecification("dedup", {"title": "A"}),
            JobSpecification("fanOut", {"n": 1, **new_root_job_params("k", START)}),
            JobSpecification("once", {"to": "x"}),
            JobSpecification("noop"),
        ]
        stack.queue_group().push(specs)
        stack.clock.advance(1)
        stack.drain()
        # Then every job ran and succeeded (fail-open), and none is left anywhere
        assert {r.job_id for r in stack.results.results if r.outcome is Outcome.SUCCEEDED} == {s.id for s in specs}
        assert sum(stack.queue_depth(q) + stack.queue_depth(q, dlq=True) for q in test_declaration.queues) == 0
        assert fault.failed_calls > 0
        # And the outage is counted per type, except for the plain job, which never asked
        unavailable = {r.job_type for r in stack.results.results if r.dedup_unavailable}
        assert unavailable == {"dedup", "fanOut", "once"}
    counts: dict[str, float] = {}
    for line in emf.getvalue().splitlines():
        document = json.loads(line)
        counts[document["JobType"]] = counts.get(document["JobType"], 0) + sum(
            document.get("DedupStoreUnavailable", [])
        )
    assert counts == {"dedup": 2, "fanOut": 1, "once": 1, "noop": 0}


def test_an_outage_is_logged_as_a_warning(stack: LocalStack, caplog: pytest.LogCaptureFixture) -> None:
    FailCalls(stack.dynamodb, "dynamodb.UpdateItem", code="ThrottlingException")
    spec = JobSpecification("dedup", {"title": "A"})
    stack.queue_group().push(spec)
    with caplog.at_level(logging.WARNING):
        stack.drain()
    assert any("fail-open" in r.getMessage() and spec.id in r.getMessage() for r in caplog.records)


def test_the_store_comes_back_after_an_outage(stack: LocalStack) -> None:
    # Given a brief outage (two failed calls), then a healthy store
    FailCalls(stack.dynamodb, "dynamodb.UpdateItem", code="ThrottlingException", times=2)
    stack.queue_group().push([JobSpecification("dedup", {"title": "A"}) for _ in range(3)])
    stack.clock.advance(1)
    stack.drain()
    results = stack.results.results
    # the first two ran without a claim (and so recorded no success); the third
    # claimed normally, and found no successful run to be a duplicate of
    assert [r.outcome for r in results] == [Outcome.SUCCEEDED] * 3
    assert [r.dedup_unavailable for r in results] == [True, True, False]
