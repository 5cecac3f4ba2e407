"""Receives that never ran a job do not use up its attempts.

A type's max_attempts is its queue's maxReceiveCount, so every receive counts.
But a receive can be spent without running the job (its batch died on an
earlier job, an invocation was throttled past the visibility timeout). Before
a job spends its last attempt on a message delivered more than once, the
runner recounts from the failure records, and a job that ran fewer times than
counted is sent again with the attempts that really ran."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, load_declaration
from jobkit.local import LocalStack

import testjobs
from conftest import FIXTURES, START
from testjobs import SCRIPTED


@pytest.fixture(scope="module")
def declaration() -> Declaration:
    return load_declaration(FIXTURES / "reliability.toml")


@pytest.fixture
def rel(declaration: Declaration) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    with LocalStack(declaration, clock=clock, seed=3) as local:
        testjobs.use_clock(clock)
        SCRIPTED.clear()
        yield local
        SCRIPTED.clear()


def lose_receives(stack: LocalStack, queue: str, count: int) -> None:
    """Receives that never reach the runner (a batch that died first, a throttled invocation)."""
    for _ in range(count):
        assert stack.sqs.receive_message(QueueUrl=stack.queue_url(queue), VisibilityTimeout=30).get("Messages")
        stack.clock.advance(31)


def test_a_job_whose_first_receives_never_ran_it_still_gets_its_attempts(rel: LocalStack) -> None:
    # Given a job that fails its first two attempts and succeeds on the third (of 3)
    job = JobSpecification("plain", {"script": {"fail": 2}})
    rel.queue_group("enwiki").push(job)
    # When its first two receives never ran it
    lose_receives(rel, "plain", 2)
    rel.drain()
    # Then it ran three times, as its type allows, and succeeded
    assert [run.attempt for run in SCRIPTED if run.job_id == job.id] == [1, 2, 3]
    assert [r.outcome for r in rel.results.results if r.outcome.is_final] == [Outcome.SUCCEEDED]
    recounts = [r for r in rel.results.results if r.outcome is Outcome.DEFERRED]
    assert [r.reason.split(":")[0] for r in recounts if r.reason] == ["recounted"]


def test_a_job_that_never_reports_is_recounted_once_and_then_dead_lettered(rel: LocalStack) -> None:
    # Given a job whose receives never run it, again and again (its batches always die)
    job = JobSpecification("plain", {"script": {}})
    rel.queue_group("enwiki").push(job)
    lose_receives(rel, "plain", 2)
    assert rel.mappings["plain"].poll() == 1  # the third receive: recounted, sent again
    lose_receives(rel, "plain", 3)  # the copy's receives never run it either
    rel.drain()
    # Then after one recount it is not recounted again: the redrive policy moves it
    assert [run.attempt for run in SCRIPTED if run.job_id == job.id] == []
    assert len(rel.dead_letters("plain")) == 1
