"""Edges a hostile or careless review found in the runner of stages: a re-enqueue
that cannot be sent on a message's last receive, attributes SQS limits or
encodes, a job that exits the process its own way, stages whose hooks raise,
and an error that cannot even say what it is. Each ends as a run, or as a dead
letter with the reason, and nothing runs twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.outcome import Outcome
from jobkit.local import LocalStack
from jobkit.records.keys import JobRef
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Run, Stage
from jobkit.sqs import string_attribute

import testjobs
from faults import EnforceSqsAttributeLimit, FailCalls
from testjobs import RUNS


def executions(job_type: str) -> list[str]:
    return [job_id for t, job_id, event in RUNS if t == job_type and event == "run"]


def deliveries(stack: LocalStack, job_id: str) -> list[Outcome]:
    return [r.outcome for r in stack.results.results if r.job_id == job_id]


def reasons(stack: LocalStack, queue: str) -> list[dict[str, str]]:
    stack.clock.advance(0.01)
    return [
        {k: v["StringValue"] for k, v in m.get("MessageAttributes", {}).items() if k.startswith("jobkit.")}
        for m in stack.dead_letters(queue)
    ]


def send(stack: LocalStack, queue: str, data: dict[str, Any], attributes: dict[str, Any]) -> None:
    stack.sqs.send_message(QueueUrl=stack.queue_url(queue), MessageBody=json.dumps(data), MessageAttributes=attributes)


def later(stack: LocalStack, job_type: str, job_id: str) -> dict[str, Any]:
    """A body of another producer's making, released far enough ahead to hop."""
    now = stack.clock.now()
    return {"v": 1, "id": job_id, "type": job_type, "params": {}, "enqueuedAt": now, "releaseAt": now + 2000}


@pytest.fixture(autouse=True)
def _no_scripted_errors() -> Any:
    yield
    testjobs.ERRORS.clear()


# -- re-enqueueing -----------------------------------------------------------------------------------


def test_a_hop_that_cannot_be_sent_on_the_last_receive_is_dead_lettered_with_the_reason(stack: LocalStack) -> None:
    # Given a one-attempt type (maxReceiveCount 1) whose job must hop, and SQS
    # refusing that one SendMessage
    job = JobSpecification("buggy", {"page": "P"}, delay=2000)
    stack.queue_group().push(job)
    FailCalls(stack.sqs, "sqs.SendMessage", times=1, match=lambda p: not p["QueueUrl"].endswith("-dlq"))
    stack.drain()
    # Then it is not left for the redrive policy to move without a word: it is
    # dead-lettered now, saying why, and the failure is on record
    assert deliveries(stack, job.id) == [Outcome.DEAD_LETTERED]
    assert executions("buggy") == []
    [reason] = reasons(stack, "buggy")
    assert reason["jobkit.reason"] == "internal_error"
    assert reason["jobkit.error"].startswith("could not re-enqueue the job (")
    [failure] = stack.journal().failures(JobRef("buggy", None, job.id))
    assert (failure.error_class, failure.dead_letter_reason) == ("ClientError", "internal_error")


def test_a_hop_that_cannot_be_sent_before_the_last_receive_is_recorded_and_tried_again(stack: LocalStack) -> None:
    job = JobSpecification("noop", delay=2000)
    stack.queue_group().push(job)
    FailCalls(stack.sqs, "sqs.SendMessage", times=1)
    stack.drain()
    outcomes = deliveries(stack, job.id)
    assert outcomes[0] is Outcome.RETRIED and outcomes[-1] is Outcome.SUCCEEDED
    assert set(outcomes[1:-1]) == {Outcome.DELAYED}
    [failure] = stack.journal().failures(JobRef("noop", None, job.id))
    assert failure.message.startswith("could not re-enqueue the job (") and failure.dead_letter_reason is None


def test_a_message_with_ten_attributes_of_its_own_can_still_hop(stack: LocalStack) -> None:
    # Given AWS's limit of 10 attributes, and a producer that used all 10
    guard = EnforceSqsAttributeLimit(stack.sqs)
    attributes = {"JobType": string_attribute("noop")} | {f"a{n}": string_attribute(str(n)) for n in range(9)}
    send(stack, "noop", later(stack, "noop", "ten"), attributes)
    stack.drain()
    # Then the runner's own attributes took the place of the producer's last ones
    *hops, last = deliveries(stack, "ten")
    assert len(hops) >= 2 and set(hops) == {Outcome.DELAYED} and last is Outcome.SUCCEEDED
    assert executions("noop") == ["ten"] and guard.rejected == 0


def test_a_binary_attribute_is_sent_on_unchanged(stack: LocalStack) -> None:
    trace = b"\x00\x01\xfftrace"
    send(stack, "noop", later(stack, "noop", "bin"), {"trace": {"DataType": "Binary", "BinaryValue": trace}})
    stack.poll_once()  # hops
    stack.clock.advance(901)
    [hopped] = stack.sqs.receive_message(QueueUrl=stack.queue_url("noop"), MessageAttributeNames=["All"])["Messages"]
    assert hopped["MessageAttributes"]["trace"]["BinaryValue"] == trace


# -- what a job raises ------------------------------------------------------------------------------------


@pytest.mark.parametrize("raised", [SystemExit(3), GeneratorExit()], ids=["sys.exit", "GeneratorExit"])
def test_a_job_that_exits_its_own_way_is_a_failed_attempt_and_the_batch_goes_on(
    stack: LocalStack, raised: BaseException
) -> None:
    testjobs.ERRORS[:] = [RuntimeError("first"), raised]  # type: ignore[list-item]
    jobs = [JobSpecification("raises", {"n": n}) for n in range(3)]
    stack.queue_group().push(jobs)
    stack.drain()
    assert [deliveries(stack, job.id) for job in jobs] == [[Outcome.DEAD_LETTERED]] * 3
    classes = sorted(r["jobkit.errorClass"] for r in reasons(stack, "raises"))
    assert classes == sorted(["RuntimeError", type(raised).__name__, "NonRetryableError"])


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for you")


def test_an_error_that_cannot_say_what_it_is_still_keeps_the_jobs_no_retry_rule(stack: LocalStack) -> None:
    testjobs.ERRORS[:] = [_Unprintable()]
    job = JobSpecification("raises")
    stack.queue_group().push(job)
    stack.drain()
    assert deliveries(stack, job.id) == [Outcome.DEAD_LETTERED]
    [reason] = reasons(stack, "raises")
    assert (reason["jobkit.reason"], reason["jobkit.errorClass"]) == ("non_retryable", "_Unprintable")


# -- stages whose hooks raise ---------------------------------------------------------------------------


class _Raises(Stage):
    def __init__(self, hook: str) -> None:
        self.hook = hook

    def start(self, delivery: Delivery, run: Run) -> None:
        if self.hook == "start":
            raise RuntimeError("a stage's start failed")

    def finish(self, delivery: Delivery, run: Run) -> None:
        if self.hook == "finish":
            raise RuntimeError("a stage's finish failed")


@pytest.mark.parametrize("hook", ["start", "finish"])
def test_a_stage_hook_that_raises_neither_fails_the_job_nor_runs_a_deliver_once_job_again(
    stack: LocalStack, hook: str
) -> None:
    stack.runners["once"].stages.insert(0, _Raises(hook))
    job = JobSpecification("once", {"n": 1})
    stack.queue_group().push(job)
    stack.drain()
    assert deliveries(stack, job.id) == [Outcome.SUCCEEDED]
    assert executions("once") == [job.id]


def test_a_stage_start_that_raises_leaves_no_watchdog_armed(stack: LocalStack) -> None:
    # The watchdog arms at start; a later stage's start failing must not leave
    # it to record a timeout for a job that finished
    stack.runners["tracked"].stages.append(_Raises("start"))
    job = JobSpecification("tracked")
    stack.queue_group().push(job)
    stack.drain()
    stack.clock.advance(1000)
    assert deliveries(stack, job.id) == [Outcome.SUCCEEDED]
    assert stack.journal().failures(JobRef("tracked", None, job.id)) == []


# -- metrics ----------------------------------------------------------------------------------------------


def test_metrics_that_could_not_all_be_written_are_not_counted_again() -> None:
    from jobkit.core.metrics import EmfMetrics
    from jobkit.core.outcome import RecordResult

    class SecondWriteFails:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def write(self, line: str) -> None:
            if len(self.lines) == 1:
                self.lines.append("")  # the failed write
                raise OSError("stdout closed")
            self.lines.append(line)

        def flush(self) -> None:
            pass

    stream = SecondWriteFails()
    metrics = EmfMetrics("ns", stream)  # type: ignore[arg-type]
    metrics.record(RecordResult("m1", "alpha", Outcome.SUCCEEDED))
    metrics.record(RecordResult("m2", "beta", Outcome.SUCCEEDED))
    with pytest.raises(OSError):
        metrics.flush()
    metrics.record(RecordResult("m3", "gamma", Outcome.SUCCEEDED))
    metrics.flush()
    written = [json.loads(line) for line in stream.lines if line]
    assert sorted(d["JobType"] for d in written) == ["alpha", "gamma"]
