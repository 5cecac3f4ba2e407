"""No silent loss: every pushed job is run, skipped for a true stated reason, or
dead-lettered with a true reason, under the inputs a hostile or careless
producer sends. Each test is one hole that adversarial testing found, named for
the behaviour that closes it; all of them go through the real runner on moto.

The DLQ tools' side (forged attributes, unreadable bodies, what `dlq list`
says) is tested in tests/functional/test_dlq_truth.py; IAM scoping, the alarm
topic and error text in tests/reliability/test_security.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from jobkit import JobQueueGroup, JobSpecification, queue_group
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobQueueError, SpecError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import load_declaration
from jobkit.local import FakeLambdaContext, LocalStack
from jobkit.local.esm import sqs_event as lambda_event
from jobkit.push import derived_job_id
from jobkit.records import JobState
from jobkit.records.keys import JobRef
from jobkit.sqs import MAX_JOB_BYTES, message_size, string_attribute
from jobkit.testing import JobkitStack, sqs_event
from jobkit.wiring import reset_default_groups

import testjobs
from conftest import FIXTURES, START
from faults import EnforceSqsSizeLimit
from testjobs import HOOKS, RUNS, SCRIPTED, SimulatedCrash


def executions(job_type: str) -> list[str]:
    return [job_id for t, job_id, event in RUNS if t == job_type and event == "run"]


def deliveries(stack: LocalStack, job_id: str) -> list[Outcome]:
    """What every delivery of a job ended as, run or not."""
    return [r.outcome for r in stack.results.results if r.job_id == job_id]


def send(stack: LocalStack, queue: str, data: dict[str, Any], **attributes: str) -> None:
    """What a producer in another language does: a body of its own making, straight to SQS."""
    stack.sqs.send_message(
        QueueUrl=stack.queue_url(queue),
        MessageBody=json.dumps(data),
        MessageAttributes={name: string_attribute(value) for name, value in attributes.items()},
    )


def body(job_type: str, job_id: str, params: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": job_id, "type": job_type, "params": params or {}, "enqueuedAt": START, **fields}


def reasons(stack: LocalStack, queue: str) -> list[dict[str, str]]:
    stack.clock.advance(0.01)  # moto shows a message again once the clock has passed its visible_at
    return [
        {k: v["StringValue"] for k, v in m.get("MessageAttributes", {}).items() if k.startswith("jobkit.")}
        for m in stack.dead_letters(queue)
    ]


# -- 1. a skipped root leaves no trace that skips others ---------------------------------------------


def test_a_root_skipped_as_a_duplicate_does_not_supersede_the_fan_out_of_the_run_it_duplicates(
    stack: LocalStack,
) -> None:
    # Given roots R1 and then R2 of a remove_duplicates type, same signature, R2 newer,
    # sent by a producer that does not record roots (so R1 is not superseded at once)
    t1, t2 = START - 20, START - 10
    r1 = body("dedupFanOut", "r1", {"leaves": 3, **new_root_job_params("page", t1)}, domain="enwiki")
    r2 = body("dedupFanOut", "r2", {"leaves": 3, **new_root_job_params("page", t2)}, domain="enwiki")
    send(stack, "dedupFanOut", r1)
    send(stack, "dedupFanOut", r2)
    # When R1 starts after R2 was enqueued, in a batch of its own (one batch would
    # run the newer root first), runs and fans out, and R2 is then a duplicate of R1
    stack.clock.advance(1)
    url = stack.queue_url("dedupFanOut")
    [first] = stack.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    assert json.loads(first["Body"])["id"] == "r1"
    stack.runners["dedupFanOut"].process(lambda_event([first], stack.queue_arn("dedupFanOut")))
    stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    stack.drain()
    by_job = {r.job_id: r.outcome for r in stack.results.results if r.job_id in ("r1", "r2")}
    assert by_job == {"r1": Outcome.SUCCEEDED, "r2": Outcome.DUPLICATE}
    # Then R2, skipped, did not advance the root: R1's three leaves all ran
    leaves = [r for r in stack.results.results if r.job_id not in ("r1", "r2")]
    assert [r.outcome for r in leaves] == [Outcome.SUCCEEDED] * 3
    assert len(executions("dedupFanOut")) == 4


def test_a_claim_taken_by_a_job_that_turns_out_superseded_is_given_back(stack: LocalStack) -> None:
    # Given a newer root recorded, and an older leaf of a remove_duplicates type
    group = stack.queue_group("enwiki")
    assert group.deduplicate_root_job(JobSpecification("dedupFanOut", new_root_job_params("page", START - 1)))
    old = {k: v for k, v in new_root_job_params("page", START - 5).items() if k != "rootJobIsSelf"}
    twin_params = {"n": 1, "cause": "a", **old}
    group.push(JobSpecification("dedupFanOut", twin_params))
    stack.clock.advance(1)
    stack.drain()
    assert [r.outcome for r in stack.results.results] == [Outcome.SUPERSEDED]
    # Then an identical job of a newer root is not deferred by a claim left behind
    new = {k: v for k, v in new_root_job_params("page", START - 1).items() if k != "rootJobIsSelf"}
    group.push(JobSpecification("dedupFanOut", {"n": 1, "cause": "b", **new}))
    stack.clock.advance(1)
    stack.drain()
    assert [r.outcome for r in stack.results.results][1:] == [Outcome.SUCCEEDED]


# -- 2. apps record roots ---------------------------------------------------------------------------


@pytest.fixture
def app_environment(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An app's process: its declaration from the environment, boto3's own clients
    (in-process moto answers them), and the process-wide default groups."""
    monkeypatch.setenv("JOBKIT_CONFIG", str(FIXTURES / "jobs.toml"))
    reset_default_groups()
    yield
    reset_default_groups()


def test_an_app_group_records_the_roots_it_pushes(stack: LocalStack, app_environment: None) -> None:
    # Given an app pushing a root job through the path the README gives apps
    # (an app stamps on the real clock; the stack's runners run on theirs, ahead)
    now = time.time()
    root = JobSpecification("fanOut", new_root_job_params("page", now - 10))
    queue_group("enwiki").push(root)
    # Then the root is recorded: an older leaf pushed later is superseded before it runs
    old_leaf = {k: v for k, v in new_root_job_params("page", now - 20).items() if k != "rootJobIsSelf"}
    queue_group("enwiki").push(JobSpecification("fanOut", old_leaf))
    assert queue_group("enwiki").deduplicate_root_job(
        JobSpecification("fanOut", new_root_job_params("other", now - 10))
    )
    stack.clock.advance(1)
    stack.drain()
    assert Counter(r.outcome for r in stack.results.results) == {Outcome.SUCCEEDED: 1, Outcome.SUPERSEDED: 1}


def test_an_app_group_pushes_even_when_the_jobs_table_is_down(
    stack: LocalStack, app_environment: None, caplog: pytest.LogCaptureFixture
) -> None:
    stack.dynamodb.delete_table(TableName=stack.declaration.table_name)
    root = JobSpecification("fanOut", new_root_job_params("page", time.time() - 10))
    assert queue_group("enwiki").push(root) == [root.id]  # fail-open
    assert "could not record root job" in caplog.text
    assert not queue_group("enwiki").deduplicate_root_job(root)
    assert stack.queue_depth("fanOut") == 1


# -- 3. delivery claims are scoped -------------------------------------------------------------------


def test_the_same_job_id_in_two_domains_or_two_types_runs_in_each(stack: LocalStack) -> None:
    # Callers choose job IDs; the same one elsewhere is another job
    stack.queue_group("enwiki").push(JobSpecification("once", id="order-1"))
    stack.queue_group("dewiki").push(JobSpecification("once", id="order-1"))
    stack.queue_group("enwiki").push(JobSpecification("onceToo", id="order-1"))
    stack.clock.advance(1)
    stack.drain()
    assert Counter(r.outcome for r in stack.results.results) == {Outcome.SUCCEEDED: 3}
    assert len(executions("once")) == 2 and len(executions("onceToo")) == 1


# -- 4. a retried parent pushes the same children ------------------------------------------------------


def test_a_retried_parent_pushes_its_children_with_the_same_ids(stack: LocalStack) -> None:
    # Given a parent that pushes three deliver_once children, then fails its first attempt
    parent = JobSpecification("parent", {"children": 3, "fail_times": 1}, domain="enwiki")
    stack.queue_group().push(parent)
    stack.clock.advance(1)
    stack.drain()
    # Then its retry pushed the same three IDs, and each child ran once
    expected = {derived_job_id(parent.stamped(START), JobSpecification("once", {"n": n})) for n in range(3)}
    assert [r.outcome for r in stack.results.attempts(parent.id)] == [Outcome.RETRIED, Outcome.SUCCEEDED]
    assert sorted(executions("once")) == sorted(expected)
    assert Counter(r.outcome for r in stack.results.results if r.job_type == "once") == {
        Outcome.SUCCEEDED: 3,
        Outcome.REDELIVERED: 3,
    }


def test_a_child_id_belongs_to_one_child_of_one_parent_message() -> None:
    parent = JobSpecification("parent", id="p-1", domain="enwiki").stamped(START)
    ann, bob = JobSpecification("once", {"to": "ann"}), JobSpecification("once", {"to": "bob"})
    assert derived_job_id(parent, ann) == derived_job_id(parent, JobSpecification("once", {"to": "ann"}))
    others = [
        derived_job_id(parent, bob),  # another child
        derived_job_id(parent, ann, 1),  # the same child pushed twice in one attempt
        derived_job_id(parent.replace(domain="dewiki"), ann),  # another parent
        derived_job_id(parent.replace(enqueued_at=START + 86400), ann),  # the same parent ID pushed again next day
    ]
    assert len({derived_job_id(parent, ann), *others}) == 5


def test_a_retried_parent_that_pushes_other_children_does_not_skip_them(stack: LocalStack) -> None:
    # Given a parent whose retry pushes a child its first attempt did not, first
    parent = JobSpecification("parent", {"children": 2, "fail_times": 1, "first": "extra"})
    HOOKS.clear()
    stack.queue_group("enwiki").push(parent)
    stack.clock.advance(1)
    stack.drain()
    # Then every distinct child ran once: none was taken for another's redelivery
    ran = Counter(executions("once"))
    assert len(ran) == 3 and set(ran.values()) == {1}


# -- 5 and 6. timestamps no clock made, and malformed root params --------------------------------------


def test_a_root_timestamp_from_the_future_is_refused_at_push(stack: LocalStack) -> None:
    ahead = JobSpecification("fanOut", new_root_job_params("page", START + 3600))
    in_ms = JobSpecification("noop", release_at=START * 1000)
    with pytest.raises(JobQueueError) as raised:
        stack.queue_group().push([ahead, in_ms, JobSpecification("noop")])
    messages = {f.job_id: f.message for f in raised.value.failed}
    assert "rootJobTimestamp is 3,600 s ahead of this clock" in messages[ahead.id]
    assert "looks like milliseconds" in messages[in_ms.id]
    assert len(raised.value.enqueued_ids) == 1


def test_a_root_timestamp_from_the_future_is_poison_and_never_recorded(stack: LocalStack) -> None:
    # Given a skewed producer's root, an hour ahead, sent straight to SQS
    send(stack, "fanOut", body("fanOut", "skewed", {"leaves": 0, **new_root_job_params("page", START + 3600)}))
    stack.clock.advance(1)
    stack.drain()
    [reason] = reasons(stack, "fanOut")
    assert reason["jobkit.reason"] == "poison" and "3,599 s ahead" in reason["jobkit.error"]
    # Then a real edit's leaf is not superseded by it
    leaf = {k: v for k, v in new_root_job_params("page", START).items() if k != "rootJobIsSelf"}
    stack.queue_group().push(JobSpecification("fanOut", leaf))
    stack.clock.advance(1)
    stack.drain()
    assert stack.results.results[-1].outcome is Outcome.SUCCEEDED


def test_a_release_time_in_milliseconds_is_poison_not_a_job_that_hops_forever(stack: LocalStack) -> None:
    send(stack, "noop", body("noop", "ms", releaseAt=START * 1000))
    stack.drain(max_polls=10)
    assert [r.outcome for r in stack.results.results] == [Outcome.POISONED]
    [reason] = reasons(stack, "noop")
    assert "looks like milliseconds" in reason["jobkit.error"]


@pytest.mark.parametrize(
    "params",
    [
        {"rootJobSignature": "a" * 40, "rootJobTimestamp": None},
        {"rootJobSignature": "a" * 40, "rootJobTimestamp": 10**400},
        {"rootJobTimestamp": START},
    ],
    ids=["null timestamp", "400-digit timestamp", "timestamp without signature"],
)
def test_malformed_root_params_are_poison_at_the_first_delivery(stack: LocalStack, params: dict[str, Any]) -> None:
    send(stack, "fanOut", body("fanOut", "bad-root", params))
    stack.drain()
    # One delivery, not three retries without a reason
    assert [(r.outcome, r.attempt) for r in stack.results.results] == [(Outcome.POISONED, 1)]
    [reason] = reasons(stack, "fanOut")
    assert reason["jobkit.reason"] == "poison" and "rootJob" in reason["jobkit.error"]


# -- 7. every accepted job can be re-enqueued ---------------------------------------------------------------


def padded(job_type: str, size: int, params: dict[str, Any], now: float, domain: str | None = None) -> JobSpecification:
    """A spec whose message (body and JobType attribute), pushed at ``now``, is exactly ``size`` bytes."""
    spec = JobSpecification(job_type, {**params, "pad": ""}, domain=domain)
    base = message_size(spec.stamped(now).to_message(), {"JobType": string_attribute(job_type)})
    return JobSpecification(job_type, {**params, "pad": "x" * (size - base)}, id=spec.id, domain=domain)


def test_a_job_at_the_size_limit_that_failed_can_still_be_deferred(stack: LocalStack) -> None:
    # Given AWS's size rule, and a remove_duplicates job of the largest size push accepts
    guard = EnforceSqsSizeLimit(stack.sqs)
    job = padded("hooked", MAX_JOB_BYTES, {"page": "X", "cause": "a"}, stack.clock.now())
    twin = JobSpecification("hooked", {**job.params, "cause": "b"})  # "cause" is an ignored param

    def run_while_the_retry_arrives() -> None:
        # The twin runs (holding the claim) when the big job's retry is delivered
        stack.clock.advance(30)  # past the retry's backoff, within the twin's lease
        [message] = stack.sqs.receive_message(
            QueueUrl=stack.queue_url("hooked"), MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
        )["Messages"]
        stack.mappings["hooked"].deliver([message])

    HOOKS.extend([lambda: False, run_while_the_retry_arrives])
    stack.queue_group().push(job)
    stack.clock.advance(1)
    stack.poll_once()  # attempt 1 fails
    stack.queue_group().push(twin)
    stack.clock.advance(1)
    stack.poll_once()  # the twin runs; the big job's attempt 2 arrives meanwhile
    # Then the big job was deferred (re-enqueued with the runner's marker), not stuck
    assert deliveries(stack, job.id) == [Outcome.RETRIED, Outcome.DEFERRED]
    assert guard.rejected == 0
    stack.drain()
    assert deliveries(stack, job.id)[-1] is Outcome.DUPLICATE


def test_a_job_at_the_size_limit_can_hop_to_a_far_release_time(stack: LocalStack) -> None:
    guard = EnforceSqsSizeLimit(stack.sqs)
    # releaseAt is in the body: size the message with it
    job = padded("noop", MAX_JOB_BYTES, {}, stack.clock.now()).replace(release_at=stack.clock.now() + 2000.0)
    job = job.replace(params={"pad": job.params["pad"][: MAX_JOB_BYTES - _size(job, stack.clock.now())]})
    stack.queue_group().push(job)
    stack.drain()
    assert deliveries(stack, job.id) == [Outcome.DELAYED, Outcome.DELAYED, Outcome.SUCCEEDED]
    assert guard.rejected == 0


def _size(spec: JobSpecification, now: float) -> int:
    body = spec.stamped(now).to_message()
    return message_size(body, {"JobType": string_attribute(spec.type)}) - len(spec.params["pad"])


# -- 8. a message runs only a type its queue serves ------------------------------------------------------


def test_a_message_whose_type_belongs_to_another_queue_is_poison(stack: LocalStack) -> None:
    # Given SendMessage on the noop queue, a body naming another declared type
    send(stack, "noop", body("permanent", "crossed"), JobType="permanent")
    stack.drain()
    assert executions("permanent") == []
    assert [(r.outcome, r.job_type) for r in stack.results.results] == [(Outcome.POISONED, "unknown")]
    [reason] = reasons(stack, "noop")
    assert "not a type of this runner's queue" in reason["jobkit.error"]
    # and each runner knows only its own queue's types (and those its jobs push), as deployed
    assert set(stack.runners["noop"].declaration.types) == {"noop"}
    assert set(stack.runners["parent"].declaration.types) == {"parent", "once"}


def test_a_body_with_two_type_keys_is_poison(stack: LocalStack) -> None:
    text = json.dumps(body("noop", "twice")).replace('"type": "noop"', '"type": "noop", "type": "alwaysFails"')
    stack.sqs.send_message(QueueUrl=stack.queue_url("noop"), MessageBody=text)
    stack.drain()
    assert executions("noop") == executions("alwaysFails") == []
    [reason] = reasons(stack, "noop")
    assert "the key 'type' twice" in reason["jobkit.error"]


# -- 9 (runner side). attempts come from the runner's own records -------------------------------------


def test_a_message_cannot_claim_earlier_attempts_it_did_not_make(stack: LocalStack) -> None:
    # Given a producer that sets the old priorAttempts field and the deferral marker itself
    send(stack, "alwaysFails", body("alwaysFails", "forged", priorAttempts=3), **{"jobkit.deferred": "1"})
    stack.drain()
    # Then the job gets all three attempts, and the reason says so truly
    assert [r.attempt for r in stack.results.attempts("forged")] == [1, 2, 3]
    [reason] = reasons(stack, "alwaysFails")
    assert (reason["jobkit.reason"], reason["jobkit.attempts"]) == ("attempts_exhausted", "3")


# -- 12 (runner side). the final attempt, and the deadline watchdog ---------------------------------------


@pytest.fixture
def scripted(stack: LocalStack) -> Iterator[LocalStack]:
    testjobs.use_clock(stack.clock)
    SCRIPTED.clear()
    yield stack
    SCRIPTED.clear()


def drain_through_crashes(stack: LocalStack) -> None:
    for _ in range(20):
        try:
            stack.drain()
            return
        except SimulatedCrash:
            stack.clock.advance(200)  # past the visibility timeout (6 x 30 s)
    raise AssertionError("did not drain")


def test_the_watchdog_records_a_job_about_to_time_out(scripted: LocalStack) -> None:
    # Given a tracked job that runs past the Lambda deadline on both its attempts
    job = JobSpecification("slow", {"script": {"hang": [1, 2]}}, domain="enwiki")
    scripted.queue_group().push(job)
    drain_through_crashes(scripted)
    # Then each attempt left a timeout record, the status says timed out, and the
    # third receive (the shared queue allows more) dead-letters it with that reason
    runs = scripted.journal().runs(JobRef("slow", "enwiki", job.id))
    timeouts = [f.attempt for f in runs.failures if f.error_class == "JobTimedOut"]
    assert sorted(timeouts) == [1, 2]
    [status] = scripted.records.statuses("slow", job.id)
    assert status.state in (JobState.TIMED_OUT, JobState.DEAD_LETTERED)  # dead-lettered at its third receive
    [reason] = reasons(scripted, "lowTraffic")
    assert reason["jobkit.reason"] == "attempts_exhausted"
    assert reason["jobkit.error"].startswith("attempt 2 did not finish: timed out (still running")


def test_a_job_killed_on_its_last_attempt_is_dead_lettered_as_never_finished(scripted: LocalStack) -> None:
    job = JobSpecification("slow", {"script": {"crash": [1, 2]}})
    scripted.queue_group().push(job)
    drain_through_crashes(scripted)
    [reason] = reasons(scripted, "lowTraffic")
    assert reason["jobkit.error"] == (
        "attempt 2 did not report back: the invocation stopped before it reported (out of memory, a crash,"
        " or a timeout), or its failure could not be recorded"
    )
    [final] = [f for f in [scripted.journal().runs(JobRef("slow", None, job.id)).final] if f]
    assert (final.attempt, final.succeeded_at) == (2, None)


def test_a_job_whose_receives_went_to_batches_that_died_gets_its_last_attempt(scripted: LocalStack) -> None:
    # Given a message received twice by invocations that died before reaching it
    job = JobSpecification("slow", {"script": {}})
    scripted.queue_group().push(job)
    for _ in range(2):
        assert scripted.sqs.receive_message(QueueUrl=scripted.queue_url("lowTraffic"), VisibilityTimeout=1)["Messages"]
        scripted.clock.advance(2)
    scripted.drain()
    # Then it is not a dead letter saying it "did not finish": the receives that never ran it
    # are recounted before its last attempt, and it runs as its first
    assert [(r.attempt, r.outcome) for r in scripted.results.attempts(job.id)] == [(1, Outcome.SUCCEEDED)]


# -- 16 to 20. the test harness behaves like AWS ---------------------------------------------------------


@pytest.fixture
def harness() -> Iterator[JobkitStack]:
    with JobkitStack(load_declaration(FIXTURES / "jobs.toml")) as stack:
        RUNS.clear()
        HOOKS.clear()
        yield stack


def test_identical_jobs_pushed_together_run_once_because_runs_take_time(harness: JobkitStack) -> None:
    harness.push([JobSpecification("dedup", {"title": "Main Page", "cause": c}) for c in ("a", "b", "c")])
    harness.drain()
    assert harness.outcomes("dedup") == {Outcome.SUCCEEDED: 1, Outcome.DUPLICATE: 2}


def test_a_failing_job_handed_to_a_handler_through_sqs_event_is_dead_lettered(harness: JobkitStack) -> None:
    response = harness.handler("permanent")(sqs_event([JobSpecification("permanent")]), FakeLambdaContext())
    assert response == {"batchItemFailures": []}
    [dead] = harness.dead_letters("permanent")
    assert dead["MessageAttributes"]["jobkit.reason"]["StringValue"] == "non_retryable"


def test_dead_letters_can_be_read_after_twelve_hours(harness: JobkitStack) -> None:
    harness.push(JobSpecification("permanent"))
    harness.drain(raise_errors=False)
    harness.advance(13 * 3600)
    assert len(harness.dead_letters("permanent")) == 1
    assert len(harness.dead_letters("permanent")) == 1  # read, and left in place


def test_simultaneous_double_deliveries_run_a_deliver_once_job_once_on_moto(stack: LocalStack) -> None:
    # Given 30 deliver_once jobs, each delivered to two containers at the same instant
    stack.queue_group().push([JobSpecification("once", {"n": n}) for n in range(30)])
    stack.clock.advance(1)
    messages = []
    while len(messages) < 30:
        messages += stack.sqs.receive_message(
            QueueUrl=stack.queue_url("once"), MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
        )["Messages"]
    containers = [stack.wiring.runner("once"), stack.wiring.runner("once")]
    start = threading.Barrier(60)

    def deliver(runner: Any, message: dict[str, Any]) -> None:
        start.wait()
        runner.process(sqs_event_of([message]), None)

    threads = [threading.Thread(target=deliver, args=(c, m)) for m in messages for c in containers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each ran once: the conditional writes are atomic, as on AWS
    assert Counter(Counter(executions("once")).values()) == {1: 30}


def sqs_event_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    from jobkit.local.esm import sqs_event as received

    return received(messages, "arn:aws:sqs:us-east-1:123456789012:test-once")


def test_fault_tests_get_the_stacks_clients_queues_a_redelivery_and_a_bounded_drain(harness: JobkitStack) -> None:
    harness.push(JobSpecification("once"))
    assert harness.queue_arn("once").endswith(":test-once") and harness.queue_url("once").endswith("/test-once")
    [message] = harness.receive("once")
    first = harness.deliver("once", [message])
    again = harness.deliver("once", [message])  # SQS delivering it twice
    assert [r.outcome for r in first + again] == [Outcome.SUCCEEDED, Outcome.REDELIVERED]
    assert harness.sqs.get_queue_attributes(QueueUrl=harness.queue_url("once"), AttributeNames=["All"])
    harness.push(JobSpecification("noop", delay=300 * 24 * 3600.0))  # hops every 15 minutes for 300 days
    with pytest.raises(RuntimeError, match="drain did not finish"):
        harness.drain(max_polls=50)


def test_a_virtual_clock_alarm_goes_off_in_the_thread_that_moves_time() -> None:
    clock, rang = VirtualClock(100.0), []
    clock.call_at(105.0, lambda: rang.append(clock.now()))
    clock.call_at(103.0, lambda: rang.append("cancelled")).cancel()
    clock.advance(4)
    assert rang == []
    clock.advance(2)
    assert rang == [106.0]


# -- found by a second, adversarial review -------------------------------------------------------------


def test_a_job_from_a_slow_clock_is_not_a_duplicate_of_a_run_that_started_before_it_was_sent(
    stack: LocalStack,
) -> None:
    # Given J1 running, and an identical J2 pushed meanwhile by a host whose clock is 10 minutes slow
    class SlowClock:
        def now(self) -> float:
            return stack.clock.now() - 600

    slow = JobQueueGroup(
        None, declaration=stack.declaration, sqs_client=stack.sqs, queue_urls=stack.queue_urls, clock=SlowClock()
    )
    HOOKS.append(lambda: slow.push(JobSpecification("hooked", {"title": "P"})))
    stack.queue_group().push(JobSpecification("hooked", {"title": "P"}))
    stack.clock.advance(5)
    stack.drain()
    # Then J2 runs: it was enqueued (SQS's own SentTimestamp) after J1 started, whatever its enqueuedAt says
    assert [r.outcome for r in stack.results.results if r.outcome.is_final] == [Outcome.SUCCEEDED] * 2


def test_an_id_or_a_signature_with_a_trailing_newline_is_refused(stack: LocalStack) -> None:
    with pytest.raises(SpecError):
        JobSpecification("noop", id="x\n")
    send(stack, "noop", body("noop", "x\n"))
    send(stack, "fanOut", body("fanOut", "y", {"rootJobSignature": "a" * 40 + "\n", "rootJobTimestamp": START}))
    stack.drain()
    assert [r.outcome for r in stack.results.results] == [Outcome.POISONED] * 2


def test_records_no_event_source_mapping_makes_cannot_crash_the_batch(stack: LocalStack) -> None:
    good = JobSpecification("noop").stamped(START)
    event = sqs_event([good], queue_arn=stack.queue_arn("noop"), now=START)
    event["Records"] += [None, "a string", {"messageId": "m", "attributes": "x"}, {"attributes": None}]
    response = stack.runners["noop"].handle(event, None)
    assert executions("noop") == [good.id]
    assert len(response["batchItemFailures"]) == 4


def test_an_error_text_that_is_not_valid_unicode_is_still_recorded(stack: LocalStack) -> None:
    # A file name decoded with surrogateescape, quoted in an exception
    name = b"report-\xff.csv".decode("utf-8", "surrogateescape")
    testjobs.ERRORS.append(FileNotFoundError(f"missing {name}"))
    spec = JobSpecification("raises", domain="enwiki")
    stack.queue_group().push(spec)
    stack.drain()
    [record] = stack.journal().runs(JobRef("raises", "enwiki", spec.id)).failures
    assert (record.error_class, record.dead_letter_reason) == ("FileNotFoundError", "non_retryable")
    assert record.message == "missing report-?.csv"


def test_a_domain_is_limited_in_bytes_so_its_records_fit_their_keys(stack: LocalStack) -> None:
    with pytest.raises(SpecError, match="255 bytes"):
        JobSpecification("alwaysFails", domain="\U0001f600" * 64)  # 256 bytes
    domain = "\U0001f600" * 63 + "abc"  # 255 bytes: every record of it fits DynamoDB's 1,024-byte sort key
    spec = JobSpecification("alwaysFails", domain=domain)
    stack.queue_group().push(spec)
    stack.drain()
    runs = stack.journal().runs(JobRef("alwaysFails", domain, spec.id))
    assert [f.attempt for f in runs.failures] == [3, 2, 1] and runs.final is not None


def test_a_job_id_reused_in_domains_that_sort_alike_keeps_its_own_records(stack: LocalStack) -> None:
    # Domain "a" and domains "a#1".. "a#5" share a key prefix: "a" still reads its own records
    for domain in ("a", "a#1", "a#2", "a#3", "a#4", "a#5"):
        stack.queue_group(domain).push(JobSpecification("alwaysFails", id="X"))
    stack.drain()
    for domain in ("a", "a#3"):
        runs = stack.journal().runs(JobRef("alwaysFails", domain, "X"))
        assert [f.attempt for f in runs.failures] == [3, 2, 1] and runs.failures[0].domain == domain
        assert runs.failures[0].dead_letter_reason == "attempts_exhausted"
