"""A batch stays inside the function's timeout.

On AWS, an invocation that reaches its timeout is stopped: no batch response
comes back, and the whole batch returns to the queue, jobs that succeeded
included. The local event source mapping models it (a handler that returns
after its deadline lost its response), and the runner hands back the jobs
that would not finish in the time left, without counting an attempt.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chainjobs
import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack

from conftest import START

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def declaration() -> Declaration:
    slow = {"class": "chainjobs:SlowJob", "timeout_s": 60, "batch_size": 10, "max_attempts": 3}
    types = {"slow": slow, "slowOnce": {**slow, "deliver_once": True, "remove_duplicates": True}}
    return parse_declaration(
        {"jobkit": {"prefix": "deadline", "code_dir": str(FIXTURES)}, "types": types}, source="test"
    )


@pytest.fixture
def stack(declaration: Declaration) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    chainjobs.RUNS.clear()
    chainjobs.CLOCK[:] = [clock]
    with LocalStack(declaration, clock=clock) as local:
        yield local
    chainjobs.RUNS.clear()


def slow_jobs(job_type: str, count: int, seconds: float) -> list[JobSpecification]:
    return [JobSpecification(job_type, {"n": n, "seconds": seconds}) for n in range(count)]


@pytest.mark.parametrize("job_type", ["slow", "slowOnce"])
def test_ten_jobs_of_20_s_in_a_60_s_function_each_run_once(stack: LocalStack, job_type: str) -> None:
    # Given a batch of 10 jobs that take 20 s each, for a function with a 60 s timeout
    stack.queue_group("enwiki").push(slow_jobs(job_type, 10, 20))
    stack.drain()
    # Then each ran once and succeeded: the jobs that would not finish were handed back
    assert sorted(n for kind, n in chainjobs.RUNS if kind == "slow") == list(range(10))
    assert stack.mappings[job_type].timeouts == 0
    assert stack.dead_letters(job_type) == []
    handed_back = [r for r in stack.results.results if r.outcome is Outcome.DEFERRED]
    # (and a job handed back gave back its claims: its copy was not deferred as its own twin)
    assert handed_back and all("handed back" in (r.reason or "") for r in handed_back), handed_back
    # a hand-back is not an attempt: every job succeeded on its first
    assert {r.attempt for r in stack.results.results if r.outcome is Outcome.SUCCEEDED} == {1}


def test_an_invocation_past_its_timeout_returns_its_whole_batch(stack: LocalStack) -> None:
    # Given a job that takes longer than the function's timeout (it runs first in its batch)
    stack.queue_group("enwiki").push(slow_jobs("slow", 1, 70))
    stack.drain()
    # Then each invocation timed out and reported nothing: SQS's redrive policy moved it
    mapping = stack.mappings["slow"]
    assert mapping.timeouts == stack.declaration.queues["slow"].max_receive_count
    assert len(stack.dead_letters("slow")) == 1
