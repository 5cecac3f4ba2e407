"""Faults at the botocore level, on real moto calls: throttles and server
errors on every SQS and DynamoDB call jobkit (and Lambda's poller) makes,
partial SendMessageBatch failures, an invocation killed after it claimed,
failed visibility changes, failed DLQ copies, a DLQ copy at the size limit,
and a lost delete. Each test drains until the queues are empty and checks the
ledger: every pushed job ended as succeeded, de-duplicated, superseded or
dead-lettered with a reason, and nothing is left anywhere."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from ledger import Category, Fate, SentJobs, fates, reason

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobQueueError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import load_declaration
from jobkit.dedup.admission import Candidate
from jobkit.local import LocalStack
from jobkit.ops.dead_letters import dead_letter
from jobkit.records import JobRuns
from jobkit.records.keys import JobRef
from jobkit.sqs import MAX_MESSAGE_BYTES, RUNNER_RESERVED_BYTES, message_size, string_attribute

import testjobs
from conftest import FIXTURES, START
from faults import (
    DYNAMODB_CAPACITY,
    DYNAMODB_SERVER_ERROR,
    DYNAMODB_THROTTLE,
    SQS_SERVER_ERROR,
    SQS_THROTTLE,
    SQS_UNAVAILABLE,
    EnforceSqsSizeLimit,
    FailBatchEntries,
    FailCalls,
)
from testjobs import SCRIPTED, SimulatedCrash

DECLARATION = load_declaration(FIXTURES / "reliability.toml")
QUEUES = sorted(DECLARATION.queues)
DOMAINS = (f"faults{n}" for n in itertools.count())


class Rig:
    """A local stack on the reliability declaration, shared by the tests of this
    module: each test gets a fresh domain (part of every dedup key) and empty queues."""

    def __init__(self) -> None:
        self.clock = VirtualClock(START)
        self.stack = LocalStack(DECLARATION, clock=self.clock, seed=3).start()
        self.sent = SentJobs(self.stack.sqs)
        testjobs.use_clock(self.clock)
        self.faults: list[FailCalls | FailBatchEntries] = []

    def fresh(self) -> str:
        for fault in self.faults:
            fault.remove()
        self.faults.clear()
        self.clock.advance(61)  # moto allows one purge of a queue a minute
        for queue in QUEUES:
            for name in (DECLARATION.queue_name(queue), DECLARATION.dlq_name(queue)):
                self.stack.sqs.purge_queue(QueueUrl=self.stack.queue_urls[name])
        self.stack.results.clear()
        self.sent.clear()
        SCRIPTED.clear()
        return next(DOMAINS)

    def fail(self, client: Any, operation: str, **options: Any) -> FailCalls:
        fault = FailCalls(client, operation, **options)
        self.faults.append(fault)
        return fault

    def fail_entries(self, match: Any, **options: Any) -> FailBatchEntries:
        fault = FailBatchEntries(self.stack.sqs, match, **options)
        self.faults.append(fault)
        return fault

    def url(self, queue: str, *, dlq: bool = False) -> str:
        return self.stack.queue_urls[DECLARATION.dlq_name(queue) if dlq else DECLARATION.queue_name(queue)]

    def drain(self) -> None:
        """Run until every queue is empty: past every backoff, delay and visibility timeout."""
        for _ in range(50):
            try:
                self.stack.drain()
            except SimulatedCrash:
                continue  # the invocation died; its batch reappears after the visibility timeout
            if all(self.stack.queue_depth(q) == 0 for q in QUEUES):
                return
            self.clock.advance(61)
        raise AssertionError("the queues did not drain")

    def dead_letters(self) -> list[dict[str, Any]]:
        self.clock.advance(0.01)  # moto shows a message again once the clock has passed its visible_at
        return [m for q in QUEUES for m in self.stack.dead_letters(q)]

    def ledger(self) -> dict[str, Fate]:
        """Every pushed job's fate, checked: nothing lost, every dead letter explained."""
        evidence = fates(self.sent.specs, self.stack.results.results, SCRIPTED, self.dead_letters())
        for job_id, fate in evidence.items():
            assert job_id in self.sent.specs, f"a job nobody pushed: {fate.describe()}"
            assert fate.category is not Category.LOST, fate.describe()
            for message in fate.dead_letters:
                if not reason(message):  # moved by the redrive policy: the failure records say why
                    spec = self.sent.specs[job_id]
                    assert self.stack.journal().runs(ref(spec)) != JobRuns(), fate.describe()
        return evidence


def ref(spec: JobSpecification) -> JobRef:
    return JobRef(spec.type, spec.domain, spec.id)


@pytest.fixture(scope="module")
def shared_rig() -> Iterator[Rig]:
    rig = Rig()
    yield rig
    rig.stack.stop()


@pytest.fixture
def rig(shared_rig: Rig) -> Rig:
    shared_rig.domain = shared_rig.fresh()  # type: ignore[attr-defined]
    return shared_rig


def a_mix(rig: Rig) -> list[JobSpecification]:
    """Jobs of every kind: plain, transient failure, permanent failure, twins,
    deliver-once, a root that fans out and leaves of an older root, a delay hop."""
    now = rig.clock.now()
    old_root = {k: v for k, v in new_root_job_params("page", now - 30).items() if k != "rootJobIsSelf"}
    return [
        JobSpecification("plain", {"script": {}}),
        JobSpecification("plain", {"script": {"fail": 1}}),
        JobSpecification("plain", {"script": {"fail": 5}}),
        JobSpecification("plain", {"script": {"permanent": True}}),
        JobSpecification("plain", {"script": {}}, delay=1000),
        JobSpecification("twin", {"key": "k", "script": {}, "n": 1}),
        JobSpecification("twin", {"key": "k", "script": {"fail": 1}, "n": 2}),
        JobSpecification("once", {"script": {"fail": 1}}),
        *(JobSpecification("leaf", {"n": n, **old_root}) for n in range(2)),
        JobSpecification("leaf", {"script": {"leaves": 3}, **new_root_job_params("page", now)}),
    ]


EXPECTED = [  # the categories of a_mix's jobs with nothing disturbed, in order
    Category.SUCCEEDED,
    Category.SUCCEEDED,
    Category.DEAD_LETTERED,
    Category.DEAD_LETTERED,
    Category.SUCCEEDED,
    Category.SUCCEEDED,  # the first twin runs; the second is its duplicate, or runs itself
    None,
    Category.SUCCEEDED,
    Category.SUPERSEDED,
    Category.SUPERSEDED,
    Category.SUCCEEDED,
]


def push_and_run(rig: Rig, specs: list[JobSpecification]) -> dict[str, Fate]:
    group = rig.stack.queue_group(rig.domain)  # type: ignore[attr-defined]
    group.push(specs)
    rig.clock.advance(1)
    rig.drain()
    return rig.ledger()


# -- throttles and server errors ------------------------------------------------------------------

SQS_CALLS = [
    "SendMessageBatch",  # push, and a root's fan-out
    "SendMessage",  # delay hops, deferrals, DLQ copies
    "ChangeMessageVisibility",  # retry backoff
    "DeleteMessage",  # the original, after its DLQ copy
    "ReceiveMessage",  # Lambda's poller
    "DeleteMessageBatch",  # Lambda's poller, after a batch
]
DYNAMODB_CALLS = ["UpdateItem", "PutItem", "DeleteItem", "Query"]


@pytest.mark.parametrize("operation", SQS_CALLS)
@pytest.mark.parametrize("error", [SQS_THROTTLE, SQS_SERVER_ERROR, SQS_UNAVAILABLE], ids=lambda e: e[0])
def test_sqs_throttles_and_server_errors_lose_nothing(rig: Rig, operation: str, error: tuple[str, int]) -> None:
    # Given the first four calls of an SQS operation fail (after the SDK's own retries)
    fault = rig.fail(rig.stack.sqs, f"sqs.{operation}", code=error[0], status=error[1], times=4)
    specs = a_mix(rig)
    # When a mix of jobs is pushed and run
    evidence = push_and_run(rig, specs)
    # Then the faults hit (a failed delete after a DLQ copy is left to the poller,
    # so the mix's two dead letters make two DeleteMessage calls), and every job
    # still ended in a terminal category
    assert fault.failed_calls == (2 if operation == "DeleteMessage" else 4)
    settled = [evidence[s.id].category for s in specs]
    assert Category.LOST not in settled
    # and the jobs no fault could have lost ended as their scripts say, or better
    for spec, expected, category in zip(specs, EXPECTED, settled, strict=True):
        if expected in (Category.SUCCEEDED, Category.SUPERSEDED) and operation != "DeleteMessageBatch":
            assert category in (expected, Category.DUPLICATE), (spec.params, evidence[spec.id].describe())


@pytest.mark.parametrize("operation", DYNAMODB_CALLS)
@pytest.mark.parametrize("error", [DYNAMODB_THROTTLE, DYNAMODB_CAPACITY, DYNAMODB_SERVER_ERROR], ids=lambda e: e[0])
def test_dynamodb_throttles_and_server_errors_lose_nothing(rig: Rig, operation: str, error: tuple[str, int]) -> None:
    # Given a DynamoDB operation fails for a while (fail-open: the jobs run anyway)
    fault = rig.fail(rig.stack.dynamodb, f"dynamodb.{operation}", code=error[0], status=error[1], times=6)
    specs = a_mix(rig)
    evidence = push_and_run(rig, specs)
    assert fault.failed_calls > 0 or operation in ("Query", "DeleteItem")
    for spec, expected in zip(specs, EXPECTED, strict=True):
        category = evidence[spec.id].category
        assert category is not Category.LOST
        if expected is Category.DEAD_LETTERED:
            assert category is Category.DEAD_LETTERED, evidence[spec.id].describe()
        elif expected is Category.SUCCEEDED:  # a store outage may cost a de-duplication, never a run
            assert category in (Category.SUCCEEDED, Category.DUPLICATE), evidence[spec.id].describe()
    dead = rig.dead_letters()
    assert {reason(m).get("jobkit.reason") for m in dead} <= {"non_retryable", "attempts_exhausted"}


def test_a_dynamodb_outage_during_everything_still_runs_every_job_once_or_more(rig: Rig) -> None:
    rig.fail(rig.stack.dynamodb, "dynamodb.*", codes=[DYNAMODB_THROTTLE, DYNAMODB_SERVER_ERROR])
    specs = a_mix(rig)
    evidence = push_and_run(rig, specs)
    for spec, expected in zip(specs, EXPECTED, strict=True):
        if expected is not None:
            # without the store nothing is de-duplicated or superseded: the old leaves run too
            want = Category.SUCCEEDED if expected is Category.SUPERSEDED else expected
            assert evidence[spec.id].category is want, evidence[spec.id].describe()


# -- SendMessageBatch partial failures ----------------------------------------------------------------


def test_entries_that_fail_in_a_batch_are_retried_and_none_is_lost(rig: Rig) -> None:
    fault = rig.fail_entries(lambda entry: int(entry["Id"]) % 3 == 0, times=3)
    specs = [JobSpecification("plain", {"script": {}, "n": n}) for n in range(25)]
    evidence = push_and_run(rig, specs)
    assert fault.failed_entries > 0
    assert rig.sent.accepted == 25
    assert {evidence[s.id].category for s in specs} == {Category.SUCCEEDED}


def test_entries_refused_for_good_are_named_and_the_rest_run(rig: Rig) -> None:
    # A sender fault (e.g. an invalid attribute) is not retried: push names exactly those jobs
    rig.fail_entries(lambda entry: '"n":3' in entry["MessageBody"], sender_fault=True, times=1)
    specs = [JobSpecification("plain", {"script": {}, "n": n}) for n in range(6)]
    with pytest.raises(JobQueueError) as raised:
        rig.stack.queue_group(rig.domain).push(specs)  # type: ignore[attr-defined]
    assert raised.value.failed_ids == (specs[3].id,)
    assert set(raised.value.enqueued_ids) == {s.id for n, s in enumerate(specs) if n != 3}
    rig.drain()
    evidence = rig.ledger()
    assert set(evidence) == set(raised.value.enqueued_ids)
    assert {fate.category for fate in evidence.values()} == {Category.SUCCEEDED}


def test_a_fan_out_whose_leaves_partly_fail_to_send_is_retried_and_loses_no_leaf(rig: Rig) -> None:
    # Given one leaf of a root's fan-out fails to send on every one of push()'s tries
    root = JobSpecification("leaf", {"script": {"leaves": 4}, **new_root_job_params("fan", rig.clock.now())})
    rig.stack.queue_group(rig.domain).push(root)  # type: ignore[attr-defined]
    fault = rig.fail_entries(lambda entry: '"n":1,' in entry["MessageBody"], times=5)
    evidence = push_and_run(rig, [])
    # Then the root's first attempt failed (push named the leaf) and its retry fanned out
    # again with the same four leaf IDs (derived from the root's ID and the push
    # order): the three the first attempt sent are the same jobs, sent twice
    assert fault.failed_entries == 5
    assert [(r.attempt, r.outcome) for r in SCRIPTED if r.job_id == root.id] == [(1, "failed"), (2, "succeeded")]
    leaves = [fate for job_id, fate in evidence.items() if job_id != root.id]
    assert len(leaves) == 4 and {fate.category for fate in leaves} == {Category.SUCCEEDED}
    assert sorted(len(fate.runs) for fate in leaves) == [1, 2, 2, 2]  # plain leaves run once per copy


# -- an invocation killed after it claimed -----------------------------------------------------------


def test_a_runner_killed_holding_a_duplicate_claim_delays_its_twin_only_until_the_lease_ends(rig: Rig) -> None:
    # Given J claims its hash and its invocation dies (a Lambda timeout), and a twin T
    # enqueued after J's claim
    group = rig.stack.queue_group(rig.domain)  # type: ignore[attr-defined]
    j = JobSpecification("twin", {"key": "k", "script": {"crash": [1]}})
    group.push(j)
    with pytest.raises(SimulatedCrash):
        rig.stack.poll_once()
    killed_at = rig.clock.now()
    rig.clock.advance(1)
    t = JobSpecification("twin", {"key": "k", "script": {}})
    group.push(t)
    # When the queues drain
    rig.drain()
    # Then T waited (deferred) while J's lease held, and ran once it lapsed (10 s)
    t_results = [r for r in rig.stack.results.results if r.job_id == t.id]
    assert t_results[0].outcome is Outcome.DEFERRED
    [t_run] = [r for r in t_results if r.outcome is Outcome.SUCCEEDED]
    assert t_run.started_at is not None and t_run.started_at >= killed_at + 10
    # and J, back after its visibility timeout, is T's duplicate: T started after J was enqueued
    evidence = rig.ledger()
    assert evidence[j.id].category is Category.DUPLICATE
    assert [r.attempt for r in SCRIPTED if r.job_id == j.id] == [1]


def test_a_deliver_once_job_killed_after_claiming_runs_when_its_message_returns(rig: Rig) -> None:
    job = JobSpecification("once", {"script": {"crash": [1]}})
    rig.stack.queue_group(rig.domain).push(job)  # type: ignore[attr-defined]
    evidence = push_and_run(rig, [])
    assert evidence[job.id].category is Category.SUCCEEDED
    # An attempt that killed its invocation wrote no record, as a receive that never ran
    # the job writes none: its last attempt is recounted (once), so it runs attempt 1 again
    # (see jobkit.runner.stages.recount)
    assert [(r.attempt, r.outcome) for r in SCRIPTED] == [(1, "crashed"), (1, "crashed"), (2, "succeeded")]


def test_a_claim_taken_and_abandoned_lapses_and_the_job_runs(rig: Rig) -> None:
    # Given a runner that admitted a deliver-once job (claiming its ID) and vanished
    job = JobSpecification("once", {"script": {}}, domain=rig.domain)  # type: ignore[attr-defined]
    store = rig.stack.dedup_store()
    now = rig.clock.now()
    admission = store.admit(
        Candidate(
            spec=job.stamped(now), ignore_duplicates=False, dedup_hash=None, deliver_once=True, lease_until=now + 10
        )
    )
    assert admission.delivery == ref(job)
    # When the job itself arrives while the claim is live, it is deferred; after, it runs
    evidence = push_and_run(rig, [job])
    outcomes = [r.outcome for r in rig.stack.results.results]
    assert outcomes[0] is Outcome.DEFERRED and outcomes[-1] is Outcome.SUCCEEDED
    assert evidence[job.id].category is Category.SUCCEEDED


# -- visibility, DLQ copies, deletes -----------------------------------------------------------------


def test_a_failed_visibility_change_retries_after_the_queues_timeout_instead(rig: Rig) -> None:
    rig.fail(rig.stack.sqs, "sqs.ChangeMessageVisibility", code="InternalError", status=500)
    job = JobSpecification("plain", {"script": {"fail": 1}})
    evidence = push_and_run(rig, [job])
    first, second = (r for r in rig.stack.results.results if r.job_id == job.id)
    assert (first.outcome, second.outcome) == (Outcome.RETRIED, Outcome.SUCCEEDED)
    visibility = DECLARATION.queues["plain"].visibility_timeout_s
    assert (second.started_at or 0) - (first.started_at or 0) >= visibility  # not the 1-3 s backoff
    assert evidence[job.id].category is Category.SUCCEEDED


def to_a_dlq(params: dict[str, Any]) -> bool:
    return bool(params["QueueUrl"].endswith("-dlq"))


def poison(rig: Rig) -> str:
    body = '{"v": 1, "id": "poison-1", "type": "plain", "params": "not an object", "enqueuedAt": 1}'
    rig.stack.sqs.send_message(
        QueueUrl=rig.url("plain"), MessageBody=body, MessageAttributes={"JobType": string_attribute("plain")}
    )
    return body


def test_a_failed_dlq_copy_leaves_the_poison_message_for_a_later_attempt(rig: Rig) -> None:
    # Given the DLQ copy of a poison message fails once
    rig.fail(rig.stack.sqs, "sqs.SendMessage", code="InternalError", status=500, times=1, match=to_a_dlq)
    body = poison(rig)
    rig.drain()
    # Then the original stayed, came back, and was dead-lettered with its reason
    assert [r.outcome for r in rig.stack.results.results] == [Outcome.RETRIED, Outcome.POISONED]
    [dead] = rig.dead_letters()
    assert dead["Body"] == body and reason(dead)["jobkit.reason"] == "poison"


def test_when_every_dlq_copy_fails_the_redrive_policy_moves_the_poison_message(rig: Rig) -> None:
    rig.fail(rig.stack.sqs, "sqs.SendMessage", code="InternalError", status=500, match=to_a_dlq)
    body = poison(rig)
    rig.drain()
    # after maxReceiveCount receives, SQS moved the original itself: no reason attributes,
    # and the ops tooling reports it as moved by the redrive policy
    assert [r.outcome for r in rig.stack.results.results] == [Outcome.RETRIED] * DECLARATION.queues[
        "plain"
    ].max_receive_count
    [dead] = rig.dead_letters()
    assert dead["Body"] == body and not reason(dead)
    assert dead_letter(dead).reason == "poison"  # the DLQ tools parse the body themselves


def test_a_failed_delete_after_the_dlq_copy_is_left_to_the_poller_not_a_second_copy(rig: Rig) -> None:
    rig.fail(rig.stack.sqs, "sqs.DeleteMessage", code="InternalError", status=500, times=1)
    job = JobSpecification("plain", {"script": {"permanent": True}})
    evidence = push_and_run(rig, [job])
    # The copy is in the DLQ: the runner does not report the record as failed, so
    # the poller deletes it. One copy, with the reason; none left in the queue
    assert [reason(m)["jobkit.reason"] for m in evidence[job.id].dead_letters] == ["non_retryable"]
    assert [r.outcome for r in rig.stack.results.results] == [Outcome.DEAD_LETTERED]


@pytest.mark.parametrize(
    "room", [400, 256, 60, 0], ids=["reason fits", "at the job limit", "some of it fits", "none fits"]
)
def test_a_dead_letter_at_the_size_limit_keeps_its_body(rig: Rig, room: int) -> None:
    # Given AWS's rule (body and attributes count), and a job whose message is `room`
    # bytes under 1 MiB that fails for good. Push refuses more than 1 MiB less the
    # 256 bytes the runner keeps for itself; a closer one can only come from
    # another producer, and is poison.
    guard = EnforceSqsSizeLimit(rig.stack.sqs)
    now = rig.clock.now()
    spec = JobSpecification("plain", {"script": {"permanent": True}, "pad": ""}, domain=rig.domain)  # type: ignore[attr-defined]
    size = message_size(spec.stamped(now).to_message(), {"JobType": string_attribute("plain")})
    job = JobSpecification(
        "plain", {"script": {"permanent": True}, "pad": "x" * (MAX_MESSAGE_BYTES - room - size)}, id=spec.id
    )
    if room >= RUNNER_RESERVED_BYTES:
        evidence = push_and_run(rig, [job])
        [dead] = evidence[job.id].dead_letters
        assert JobSpecification.from_message(dead["Body"]) == JobSpecification.from_message(rig.sent.bodies[job.id])
        expected = (Outcome.DEAD_LETTERED, "non_retryable")
    else:
        body = job.stamped(now).to_message()
        rig.stack.sqs.send_message(
            QueueUrl=rig.url("plain"), MessageBody=body, MessageAttributes={"JobType": string_attribute("plain")}
        )
        rig.drain()
        [dead] = rig.dead_letters()
        assert dead["Body"] == body
        expected = (Outcome.POISONED, "poison")
    # Then it was dead-lettered on its first attempt, its body whole, with as much of
    # the reason as fits (the failure record has all of it)
    assert [r.outcome for r in rig.stack.results.results] == [expected[0]]
    assert (reason(dead).get("jobkit.reason") == expected[1]) is (room >= 60)
    assert guard.rejected == 0
    if expected[0] is Outcome.DEAD_LETTERED:
        [record] = rig.stack.journal().failures(ref(rig.sent.specs[job.id]))
        assert (record.error_class, record.dead_letter_reason) == ("NonRetryableError", "non_retryable")


def test_a_lost_delete_after_the_last_attempt_succeeded_is_a_redelivery_not_a_dead_letter(rig: Rig) -> None:
    # Given a deliver-once job on a shared queue whose limit (2) is below the queue's
    # maxReceiveCount (3): it succeeds on attempt 2, and the poller's delete fails
    rig.fail(rig.stack.sqs, "sqs.DeleteMessageBatch", code="InternalError", status=500, times=1)
    job = JobSpecification("once", {"script": {"fail": 1}})
    evidence = push_and_run(rig, [job])
    # Then its third delivery is acknowledged as a redelivery of a job that ran, not
    # dead-lettered as one that "did not finish"
    assert [(r.attempt, r.outcome) for r in rig.stack.results.results] == [
        (1, Outcome.RETRIED),
        (2, Outcome.SUCCEEDED),
        (3, Outcome.REDELIVERED),
    ]
    assert not evidence[job.id].dead_letters


def test_a_lost_delete_after_success_runs_a_plain_job_again(rig: Rig) -> None:
    # SQS's at-least-once, made visible: the batch's delete fails, the jobs run again
    rig.fail(rig.stack.sqs, "sqs.DeleteMessageBatch", code="InternalError", status=500, times=1)
    specs = [JobSpecification("plain", {"script": {}, "n": n}) for n in range(3)]
    evidence = push_and_run(rig, specs)
    assert all(len(evidence[s.id].runs) == 2 for s in specs)
    assert {evidence[s.id].category for s in specs} == {Category.SUCCEEDED}


def test_an_invocation_that_dies_mid_batch_loses_nothing(rig: Rig) -> None:
    # Given a batch of four in which the second job kills the invocation: the first
    # has run, the last two have not, and nothing was reported or deleted
    specs = [JobSpecification("plain", {"script": {"crash": [1]} if n == 1 else {}, "n": n}) for n in range(4)]
    rig.stack.queue_group(rig.domain).push(specs)  # type: ignore[attr-defined]
    with pytest.raises(SimulatedCrash):
        rig.stack.poll_once()
    assert rig.stack.results.results == []  # the invocation never reported
    # When the batch reappears after its visibility timeout
    evidence = push_and_run(rig, [])
    # Then every job ran to success; the first twice (at-least-once), all on their next attempt
    assert {evidence[s.id].category for s in specs} == {Category.SUCCEEDED}
    assert [r.attempt for r in evidence[specs[0].id].runs] == [1, 2]
    assert [r.attempt for r in evidence[specs[2].id].runs] == [2]
