"""Edges of the runtime fidelity fixes, found by a hostile review: the recount
with many attempts, a hand-back or a recount whose send SQS refuses, a hand-back
in an invocation that then times out, a recounted job that SQS's own redrive
moves back, and a producer's forged Lambda lineage. Each ends as promised:
every job gets its attempts, and only what ran counts as one."""

from __future__ import annotations

from typing import Any

import chainjobs
import edgejobs
import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack

import testjobs
from conftest import FIXTURES, START
from faults import FailCalls
from testjobs import SCRIPTED

FAST_RETRY = {"base_s": 1, "factor": 1.0, "cap_s": 1, "jitter": 0.0}


def declared(prefix: str, **types: dict[str, Any]) -> Declaration:
    return parse_declaration({"jobkit": {"prefix": prefix, "code_dir": str(FIXTURES)}, "types": types}, source="test")


@pytest.fixture
def clock() -> VirtualClock:
    clock = VirtualClock(START)
    edgejobs.RUNS.clear()
    edgejobs.CLOCK[:] = [clock]
    return clock


def runs_of(job: JobSpecification) -> list[int]:
    return [attempt for job_id, attempt in edgejobs.RUNS if job_id == job.id]


def receive(stack: LocalStack, queue: str, n: int = 10) -> list[Any]:
    return stack.sqs.receive_message(
        QueueUrl=stack.queue_url(queue), MaxNumberOfMessages=n, AttributeNames=["All"], MessageAttributeNames=["All"]
    ).get("Messages", [])


def lose(stack: LocalStack, queue: str, count: int) -> None:
    """Receives that never run the job (a batch that died first, a throttled invocation)."""
    for _ in range(count):
        assert stack.sqs.receive_message(QueueUrl=stack.queue_url(queue), VisibilityTimeout=30).get("Messages")
        stack.clock.advance(31)


def native_redrive(stack: LocalStack, queue: str) -> int:
    """SQS's own redrive: each dead letter a new message with every attribute."""
    dlq, url = stack.queue_url(queue, dlq=True), stack.queue_url(queue)
    moved = 0
    for message in stack.sqs.receive_message(
        QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=30
    ).get("Messages", []):
        stack.sqs.send_message(
            QueueUrl=url, MessageBody=message["Body"], MessageAttributes=message.get("MessageAttributes", {})
        )
        stack.sqs.delete_message(QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"])
        moved += 1
    return moved


def test_a_job_that_fails_every_one_of_25_attempts_is_not_recounted(clock: VirtualClock) -> None:
    # Every attempt ran and wrote its failure record: there is nothing to recount (the
    # recount read only the 20 newest records, and recounted 4 attempts that had run)
    many = {"class": "testjobs:ScriptedJob", "max_attempts": 25, "timeout_s": 10, "backoff": FAST_RETRY}
    with LocalStack(declared("edger", many=many), clock=clock, seed=3) as stack:
        testjobs.use_clock(clock)
        SCRIPTED.clear()
        job = JobSpecification("many", {"script": {"fail": 1000}})
        stack.queue_group("enwiki").push(job)
        stack.drain()
        assert [r for r in stack.results.results if r.outcome is Outcome.DEFERRED] == []
        assert [run.attempt for run in SCRIPTED if run.job_id == job.id] == list(range(1, 26))
        SCRIPTED.clear()


def test_a_hand_back_that_sqs_refuses_runs_the_job_and_costs_no_attempt(clock: VirtualClock) -> None:
    edge = {"class": "edgejobs:EdgeJob", "max_attempts": 3, "timeout_s": 60, "batch_size": 10, "backoff": FAST_RETRY}
    with LocalStack(declared("edgeh", edge=edge), clock=clock, seed=1) as stack:
        x = JobSpecification("edge", {"fail": 99, "seconds": 1})
        group = stack.queue_group("enwiki")
        group.push(x)
        mapping = stack.mappings["edge"]
        [first] = receive(stack, "edge")
        mapping.deliver([first])  # attempt 1 runs and fails
        stack.clock.advance(5)
        slow = JobSpecification("edge", {"seconds": 50})
        group.push(slow)
        messages = receive(stack, "edge")
        assert len(messages) == 2
        x_first = sorted(messages, key=lambda m: x.id not in m["Body"])
        # receive 2 of X, behind a 50 s job: it would be handed back, but SQS refuses the send
        fault = FailCalls(stack.sqs, "sqs.SendMessage", code="InternalError", status=500, times=1)
        mapping.deliver(list(reversed(x_first)))
        fault.remove()
        stack.clock.advance(400)
        stack.drain()
        # Then it got its three attempts (the refused hand-back ran it instead)
        assert runs_of(x) == [1, 2, 3]
        assert len(stack.dead_letters("edge")) == 1


def test_a_recount_that_sqs_refuses_to_send_runs_the_job_as_its_last_attempt(clock: VirtualClock) -> None:
    edge = {"class": "edgejobs:EdgeJob", "max_attempts": 3, "timeout_s": 10, "batch_size": 10}
    with LocalStack(declared("edgec", edge=edge), clock=clock, seed=1) as stack:
        x = JobSpecification("edge", {})
        stack.queue_group("enwiki").push(x)
        lose(stack, "edge", 2)
        fault = FailCalls(
            stack.sqs,
            "sqs.SendMessage",
            code="InternalError",
            status=500,
            times=1,
            match=lambda p: not p["QueueUrl"].endswith("-dlq"),
        )
        stack.drain()
        fault.remove()
        assert fault.failed_calls == 1
        assert stack.dead_letters("edge") == []
        assert runs_of(x) == [3]


def test_a_job_handed_back_before_its_invocation_timed_out_runs_once(clock: VirtualClock) -> None:
    base = {"class": "edgejobs:EdgeJob", "max_attempts": 3, "timeout_s": 60, "batch_size": 10, "queue": "work"}
    with LocalStack(declared("edget", slowA=dict(base), fastB=dict(base)), clock=clock, seed=1) as stack:
        group = stack.queue_group("enwiki")
        group.push(JobSpecification("fastB", {"seconds": 1}))
        stack.drain()  # the container has seen fastB take 1 s
        s1, s2 = JobSpecification("slowA", {"seconds": 30}), JobSpecification("slowA", {"seconds": 30})
        f1 = JobSpecification("fastB", {"seconds": 40})  # slower than its type has been
        for spec in (s1, s2, f1):
            group.push(spec)
        messages = receive(stack, "work")
        while len(messages) < 3:  # SQS may answer with some of them
            messages += receive(stack, "work")
        order = {s1.id: 0, s2.id: 1, f1.id: 2}
        messages.sort(key=lambda m: next(v for k, v in order.items() if k in m["Body"]))
        stack.mappings["work"].deliver(messages)
        # Then s2 is handed back, and so is f1 after it, whatever its type's estimate (the
        # time left only shrinks): the invocation answers in time, and s2's copy is its only
        # delivery (before, f1 ran past the deadline and s2 came back twice: its copy, and
        # its original with the lost batch)
        assert stack.mappings["work"].timeouts == 0
        assert (len(runs_of(s1)), len(runs_of(s2)), len(runs_of(f1))) == (1, 0, 0)
        handed = {r.job_id for r in stack.results.results if r.outcome is Outcome.DEFERRED}
        assert handed == {s2.id, f1.id}


def test_a_recounted_job_redriven_by_sqs_is_recounted_again(clock: VirtualClock) -> None:
    edge = {"class": "edgejobs:EdgeJob", "max_attempts": 3, "timeout_s": 10, "batch_size": 10, "backoff": FAST_RETRY}
    with LocalStack(declared("edgerr", edge=edge), clock=clock, seed=1) as stack:
        job = JobSpecification("edge", {"fail_runs": 1})  # its first run fails, then it succeeds
        stack.queue_group("enwiki").push(job)
        lose(stack, "edge", 2)
        assert stack.mappings["edge"].poll() == 1  # recounted: a copy whose record says so
        lose(stack, "edge", 3)  # the copy's receives are lost too (a long throttle): SQS moves it
        assert not stack.sqs.receive_message(QueueUrl=stack.queue_url("edge")).get("Messages")
        assert len(stack.dead_letters("edge")) == 1
        stack.clock.advance(60)
        assert native_redrive(stack, "edge") == 1  # a new message: its record is not the copy's
        lose(stack, "edge", 2)
        stack.drain()
        assert stack.dead_letters("edge") == []
        assert len(runs_of(job)) == 2


@pytest.mark.parametrize("recursive_loop", [None, "Terminate"])
@pytest.mark.parametrize("count", ["9" * 5000, "\u00b2", "-3", ""])
def test_a_forged_lineage_count_counts_nothing(clock: VirtualClock, recursive_loop: str | None, count: str) -> None:
    types = {"later": {"class": "chainjobs:LaterJob", "batch_size": 10}}
    chainjobs.RUNS.clear()
    with LocalStack(declared("edgel", **types), clock=clock, recursive_loop=recursive_loop) as stack:
        stack.queue_group("enwiki").push([JobSpecification("later", {"n": n}) for n in range(9)])
        header = f"Root=1-00000000-000000000000000000000000;Lineage=abcdef01:{count}"
        stack.sqs.send_message(
            QueueUrl=stack.queue_url("later"),
            MessageBody=JobSpecification("later", {"n": 99}).stamped(stack.clock.now()).to_message(),
            MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": header}},
        )
        stack.drain()
        assert sum(1 for kind, _ in chainjobs.RUNS if kind == "later") == 10
        assert stack.dead_letters("later") == []
    chainjobs.RUNS.clear()
