"""No silent loss in flow control: debounce windows and holds in combination
with domains, roots, redrives and reused job IDs. Each test is a way a job was
lost, or ran twice, or was dead-lettered for a false reason, found by hostile
review; all of them go through the real runner on moto, with the reliability
declaration (tests/fixtures/reliability.toml: ``debounced`` waits 3 s for later
jobs of its ``params.key``; ``limited`` runs one job per key at once, two a
second, and holds a job back at most 60 s). docs/flow-control.md and
docs/reliability.md state the rules these tests hold the runner to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration, load_declaration
from jobkit.local import LocalStack
from jobkit.ops.redrive import redrive
from jobkit.ops.scope import resolve_scope
from jobkit.records.leases import Lease, Leases

import testjobs
from conftest import FIXTURES, START
from faults import DYNAMODB_THROTTLE, SQS_THROTTLE, FailCalls
from testjobs import SCRIPTED, SimulatedCrash


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


def runs(job_id: str, outcome: str = "succeeded") -> int:
    return sum(1 for run in SCRIPTED if run.job_id == job_id and run.outcome == outcome)


def results(stack: LocalStack, job_id: str, domain: str | None = None) -> list[Any]:
    return [r for r in stack.results.results if r.job_id == job_id and (domain is None or r.domain == domain)]


def final(stack: LocalStack, job_id: str, domain: str | None = None) -> Any:
    return [r for r in results(stack, job_id, domain) if r.outcome.is_final][-1]


def table(stack: LocalStack) -> list[tuple[Any, ...]]:
    return [(r.job_id, r.domain, r.outcome, r.reason) for r in stack.results.results]


def leaf_params(signature: str, timestamp: float, **params: Any) -> dict[str, Any]:
    root = {k: v for k, v in new_root_job_params(signature, timestamp).items() if k != "rootJobIsSelf"}
    return {**params, **root}


def native_redrive(stack: LocalStack, queue: str) -> int:
    """What SQS's own StartMessageMoveTask does, which moto in-process lacks: each
    dead letter becomes a new message (a new ID and send time) on the queue,
    with the body and message attributes it had."""
    dlq, url = stack.queue_url(queue, dlq=True), stack.queue_url(queue)
    moved = 0
    while True:
        messages = stack.sqs.receive_message(
            QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=30
        ).get("Messages", [])
        if not messages:
            return moved
        for message in messages:
            stack.sqs.send_message(
                QueueUrl=url, MessageBody=message["Body"], MessageAttributes=message.get("MessageAttributes", {})
            )
            stack.sqs.delete_message(QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"])
            moved += 1


# -- debounce windows are per domain ----------------------------------------------------------------


def test_a_job_in_one_domain_is_not_debounced_by_the_same_key_in_another(rel: LocalStack) -> None:
    # Given enwiki and then, 2 s later, dewiki, each pushing a job for the page Paris
    en = JobSpecification("debounced", {"key": "Paris"})
    rel.queue_group("enwiki").push(en)
    rel.clock.advance(2)
    de = JobSpecification("debounced", {"key": "Paris"})
    rel.queue_group("dewiki").push(de)
    rel.drain()
    # Then each domain's job ran: one does none of the other's work
    assert (runs(en.id), runs(de.id)) == (1, 1), [r.outcome for r in rel.results.results]


# -- a job is debounced only by a job that runs ---------------------------------------------------------


def test_a_newer_roots_leaf_is_not_debounced_by_a_stale_leaf(rel: LocalStack) -> None:
    # Given roots R1 < R2 of one template, R2 recorded, each fanning out a leaf for Paris
    group = rel.queue_group("enwiki")
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 10)))
    newer = JobSpecification("debounced", leaf_params("tpl", START - 10, key="Paris"))
    group.push(newer)
    # When R1's stale leaf arrives 2 s later, within the wait
    rel.clock.advance(2)
    stale = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris"))
    group.push(stale)
    rel.drain()
    # Then the stale leaf is superseded without taking the window, and R2's leaf runs
    assert final(rel, stale.id).outcome is Outcome.SUPERSEDED
    assert runs(newer.id) == 1, [(r.job_id, r.outcome, r.reason) for r in rel.results.results]
    assert runs(stale.id) == 0


def test_a_window_owner_superseded_while_it_waits_still_runs_for_the_jobs_it_debounced(rel: LocalStack) -> None:
    # Given a plain job for Paris, then a leaf of root R1 for Paris 1 s later (it owns the window)
    group = rel.queue_group("enwiki")
    plain = JobSpecification("debounced", {"key": "Paris"})
    group.push(plain)
    rel.clock.advance(1)
    leaf = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris"))
    group.push(leaf)
    rel.drain(until=START + 2)  # both registered: the leaf is the window's latest
    # When a newer root R2 is recorded while the leaf waits
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 5)))
    rel.drain()
    # Then the plain job was debounced by the leaf, and the leaf ran: its supersession
    # does not cover the plain job's work
    assert final(rel, plain.id).outcome is Outcome.DEBOUNCED
    assert runs(leaf.id) == 1, [(r.job_id, r.outcome, r.reason) for r in rel.results.results]


def test_a_window_owner_redelivered_while_the_table_is_throttled_still_runs_for_the_jobs_it_debounced(
    rel: LocalStack,
) -> None:
    # Found by the reliability model. Given a plain job for Paris, then a leaf of
    # root R1 for Paris that owns the window, whose first run crashes
    group = rel.queue_group("enwiki")
    plain = JobSpecification("debounced", {"key": "Paris"})
    group.push(plain)
    rel.clock.advance(1)
    leaf = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris", script={"crash": [1]}))
    group.push(leaf)
    rel.drain(until=START + 2)
    # When a newer root R2 is recorded, and the jobs table is throttled when the
    # leaf comes back to run again
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 5)))
    with pytest.raises(SimulatedCrash):  # its wait is over: the run that dies with its invocation
        rel.drain(until=START + 10)
    assert runs(leaf.id, "crashed") == 1, table(rel)
    throttled = FailCalls(rel.dynamodb, "dynamodb.*", code=DYNAMODB_THROTTLE[0], status=DYNAMODB_THROTTLE[1], times=4)
    rel.drain()
    throttled.remove()
    # Then the plain job was debounced by the leaf, and the leaf ran for it
    assert throttled.failed_calls
    assert final(rel, plain.id).outcome is Outcome.DEBOUNCED
    assert runs(leaf.id) == 1, table(rel)


def test_a_window_owner_whose_wait_was_never_sent_still_runs_for_the_jobs_it_debounced(rel: LocalStack) -> None:
    # Given a plain job for Paris, registered and waiting; then a leaf of root R1 for Paris
    # that takes the window, but the send of its wait fails (it will be delivered again)
    group = rel.queue_group("enwiki")
    plain = JobSpecification("debounced", {"key": "Paris"})
    group.push(plain)
    rel.drain(until=START + 0.5)
    rel.clock.advance(1)
    leaf = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris"))
    group.push(leaf)
    resend = FailCalls(rel.sqs, "sqs.SendMessage", code=SQS_THROTTLE[0], status=SQS_THROTTLE[1], times=10)
    rel.drain(until=START + 2)
    resend.remove()
    assert resend.failed_calls, "the leaf's wait was not sent"
    # When a newer root R2 is recorded before the leaf comes back
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 5)))
    rel.drain()
    # Then the plain job was debounced by the leaf, and the leaf ran: it had taken the window
    outcomes = [(r.job_id, r.outcome, r.reason) for r in rel.results.results]
    assert final(rel, plain.id).outcome is Outcome.DEBOUNCED, outcomes
    assert runs(leaf.id) == 1, outcomes


def test_a_window_owner_recounted_on_its_last_attempt_keeps_its_window(rel: LocalStack) -> None:
    # Given a plain job for Paris, and a leaf for Paris that takes the window but whose wait
    # is never sent, and that then fails its second attempt: its last one is recounted
    # (the first receive never ran it), and a newer root is recorded meanwhile
    group = rel.queue_group("enwiki")
    plain = JobSpecification("debounced", {"key": "Paris"})
    group.push(plain)
    rel.drain(until=START + 0.5)
    rel.clock.advance(1)
    leaf = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris", script={"fail": 2}))
    group.push(leaf)
    resend = FailCalls(rel.sqs, "sqs.SendMessage", code=SQS_THROTTLE[0], status=SQS_THROTTLE[1], times=1)
    rel.drain(until=START + 2)
    resend.remove()
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 5)))
    rel.drain()
    # Then the leaf, which owes the plain job its run, ran until it succeeded
    outcomes = table(rel)
    assert final(rel, plain.id).outcome is Outcome.DEBOUNCED, outcomes
    assert runs(leaf.id) == 1, outcomes


def test_an_owner_whose_run_failed_still_runs_for_the_jobs_it_debounced_after_a_later_ready_job_opens_a_window(
    rel: LocalStack,
) -> None:
    # Found by the reliability model. Given a plain job J for Paris, then a leaf O of
    # root R1 for Paris: O owns the window, debounces J, and its first run fails
    group = rel.queue_group("enwiki")
    j = JobSpecification("debounced", {"key": "Paris", "rev": 1})
    group.push(j)
    rel.clock.advance(1)
    o = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris", rev=2, script={"fail": 1}))
    group.push(o)
    rel.drain(until=START + 5)
    assert [run.outcome for run in SCRIPTED if run.job_id == o.id] == ["failed"], table(rel)
    # When, before O is retried, a newer root R2 is recorded, and a job L for Paris
    # arrives that O's run could not cover (SQS saw it after that run began): from a
    # host whose clock runs 60 s slow, so pushed before O as debounce orders jobs.
    # L opens a new window, and its registration is the window's when O comes back
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 5)))
    late = JobSpecification("debounced", {"key": "Paris", "rev": 0}, enqueued_at=rel.clock.now() - 60)
    group.push(late)
    rel.drain(until=rel.clock.now() + 0.5)
    assert results(rel, late.id), table(rel)
    rel.clock.advance(30)  # O comes back once no runner's cache vouches for R1
    rel.drain()
    # Then O's retry still runs (J counts on it, and R2 does not cover J), and so does L
    outcomes = table(rel)
    assert final(rel, j.id).outcome is Outcome.DEBOUNCED, outcomes
    assert runs(o.id) == 1, outcomes
    assert runs(late.id) == 1, outcomes


def test_a_stale_leaf_delivered_again_does_not_take_the_window(rel: LocalStack) -> None:
    # Given a newer root's leaf for Paris waiting in its window, and a stale leaf whose
    # first delivery died before it reached the window (an invocation killed early)
    group = rel.queue_group("enwiki")
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 10)))
    newer = JobSpecification("debounced", leaf_params("tpl", START - 10, key="Paris"))
    group.push(newer)
    rel.drain(until=START + 0.5)
    rel.clock.advance(1)
    stale = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris"))
    group.push(stale)
    url = rel.queue_url("debounced")
    assert rel.sqs.receive_message(QueueUrl=url, VisibilityTimeout=1).get("Messages")  # received, never reported
    rel.clock.advance(2)
    rel.drain()
    # Then the stale leaf is superseded on its second delivery, and the newer leaf runs
    assert final(rel, stale.id).outcome is Outcome.SUPERSEDED
    assert (runs(newer.id), runs(stale.id)) == (1, 0), [(r.job_id, r.outcome, r.reason) for r in rel.results.results]


def test_a_window_owner_whose_job_id_already_ran_does_not_take_the_window(rel: LocalStack) -> None:
    # Given edit-1 for Paris, run (deliver_once: its ID has now run)
    group = rel.queue_group("enwiki")
    group.push(JobSpecification("debouncedTwin", {"key": "Paris", "text": "v1"}, id="edit-1"))
    rel.drain()
    # When edit-2 for Paris is pushed, and 1 s later a retry of edit-1's old request (its ID)
    rel.clock.advance(20)
    group.push(JobSpecification("debouncedTwin", {"key": "Paris", "text": "v2"}, id="edit-2"))
    rel.clock.advance(1)
    group.push(JobSpecification("debouncedTwin", {"key": "Paris", "text": "v1"}, id="edit-1"))
    rel.drain()
    # Then the retry is skipped before it can debounce edit-2, and edit-2 runs
    assert final(rel, "edit-1").outcome is Outcome.REDELIVERED
    assert (runs("edit-1"), runs("edit-2")) == (1, 1), table(rel)


def test_a_retry_whose_delivery_the_table_cannot_tell_about_does_not_take_the_window(rel: LocalStack) -> None:
    # Found by the reliability model. Given edit-1 for Paris, run (deliver_once),
    # then edit-2 for Paris and a retry of edit-1's old request (its ID)
    group = rel.queue_group("enwiki")
    group.push(JobSpecification("debouncedTwin", {"key": "Paris", "text": "v1"}, id="edit-1"))
    rel.drain()
    rel.clock.advance(20)
    group.push(JobSpecification("debouncedTwin", {"key": "Paris", "text": "v2"}, id="edit-2"))
    rel.clock.advance(1)
    group.push(JobSpecification("debouncedTwin", {"key": "Paris", "text": "v1"}, id="edit-1"))
    # When the read that would tell that edit-1 already ran is throttled
    read = FailCalls(
        rel.dynamodb,
        "dynamodb.GetItem",
        code=DYNAMODB_THROTTLE[0],
        status=DYNAMODB_THROTTLE[1],
        times=1,
        match=lambda params: "edit-1" in str(params["Key"]),
    )
    rel.drain()
    read.remove()
    # Then the retry did not debounce edit-2 (it would never run for it): edit-2 ran
    assert read.failed_calls, "the delivery read was not throttled"
    assert final(rel, "edit-1").outcome is Outcome.REDELIVERED
    assert (runs("edit-1"), runs("edit-2")) == (1, 1), table(rel)


def test_a_forged_debounce_attribute_takes_no_window_and_gains_its_job_only_a_run(rel: LocalStack) -> None:
    # Given a newer root recorded, and G for Paris pushed and waiting in its window
    group = rel.queue_group("enwiki")
    assert group.deduplicate_root_job(JobSpecification("debounced", new_root_job_params("tpl", START - 10)))
    g = JobSpecification("debounced", {"key": "Paris", "rev": 1}, domain="enwiki")
    group.push(g)
    rel.drain(until=START + 0.5)
    # When a sender sends a stale leaf for Paris with a debounce registration of its own making
    stale = JobSpecification("debounced", leaf_params("tpl", START - 20, key="Paris"), domain="enwiki")
    rel.sqs.send_message(
        QueueUrl=rel.queue_url("debounced"),
        MessageBody=stale.stamped(START + 1).to_message(),
        MessageAttributes={"jobkit.debounce": {"DataType": "String", "StringValue": "forged"}},
    )
    rel.drain()
    # Then G still runs: the forged registration took no window and debounced nothing.
    # The stale leaf runs once, as if it had owned a window (a registered job whose
    # window a later-ready job reopened must run for the jobs it debounced, and
    # nothing tells the two apart): what its sender would have had by sending it
    # without root params, and never a job of anyone else's
    assert runs(g.id) == 1, table(rel)
    assert runs(stale.id) == 1, table(rel)
    assert not [r for r in rel.results.results if r.outcome is Outcome.DEBOUNCED], table(rel)


# -- a run covers only the jobs it could have: pushed, seen and released before it began ------------------


def test_a_job_from_a_slow_clock_is_not_debounced_by_a_run_before_it_was_sent(rel: LocalStack) -> None:
    # Given A for Paris, run at t=3
    group = rel.queue_group("enwiki")
    a = JobSpecification("debounced", {"key": "Paris", "rev": 1})
    group.push(a)
    rel.drain()
    # When B for Paris is pushed at t=40 by a host whose clock is 60 s slow (within the 300 s allowed)
    rel.clock.advance_to(START + 40)
    b = JobSpecification("debounced", {"key": "Paris", "rev": 2}, enqueued_at=rel.clock.now() - 60)
    group.push(b)
    rel.drain()
    # Then B runs: A's run began before SQS saw B
    assert (runs(a.id), runs(b.id)) == (1, 1), table(rel)


def test_a_delayed_job_is_not_debounced_by_a_run_before_its_release(rel: LocalStack) -> None:
    # Given D for Paris, to run no earlier than t=60; and E for Paris at t=30, run at t=33
    group = rel.queue_group("enwiki")
    d = JobSpecification("debounced", {"key": "Paris", "rev": 1}, release_at=START + 60)
    group.push(d)
    rel.drain(until=START + 30)
    e = JobSpecification("debounced", {"key": "Paris", "rev": 2})
    group.push(e)
    rel.drain()
    # Then D runs after its release: E's run came before it
    assert (runs(e.id), runs(d.id)) == (1, 1), table(rel)
    assert [run.started_at >= START + 60 for run in SCRIPTED if run.job_id == d.id] == [True]


@pytest.mark.parametrize("how", ["copy", "native"])
def test_a_redriven_window_owner_runs_for_the_jobs_it_debounced(rel: LocalStack, how: str) -> None:
    # Given J, then O for Paris: O owns the run, and fails its 3 attempts
    group = rel.queue_group("enwiki")
    j = JobSpecification("debounced", {"key": "Paris", "rev": 1})
    group.push(j)
    rel.clock.advance(1)
    o = JobSpecification("debounced", {"key": "Paris", "rev": 2, "script": {"fail": 3}})
    group.push(o)
    rel.drain()
    assert (final(rel, j.id).outcome, final(rel, o.id).outcome) == (Outcome.DEBOUNCED, Outcome.DEAD_LETTERED)
    # When the operator redrives O an hour later, with no other job for Paris since
    rel.clock.advance(3600)
    if how == "copy":
        redrive(rel.sqs, rel.wiring.directory, resolve_scope(rel.declaration, "debounced"))
    else:
        assert native_redrive(rel, "debounced") == 1
    redriven_at = rel.clock.now()
    rel.drain()
    # Then O runs again, for itself and for J (its script fails it again: what counts is that it ran)
    assert [run.attempt for run in SCRIPTED if run.job_id == o.id and run.started_at >= redriven_at] == [1, 2, 3]


# -- ordering uses the time a job was pushed, whatever copy carries it ------------------------------------


@pytest.mark.parametrize("how", ["copy", "native"])
def test_a_redriven_job_is_ordered_by_when_it_was_pushed_not_by_the_redrive(rel: LocalStack, how: str) -> None:
    # Given A (rev 1) of Paris, which fails for good and is dead-lettered
    group = rel.queue_group("enwiki")
    first = JobSpecification("debounced", {"key": "Paris", "rev": 1, "script": {"permanent": True}})
    group.push(first)
    rel.drain()
    assert final(rel, first.id).outcome is Outcome.DEAD_LETTERED
    # And, 60 s later, B (rev 2) of Paris, waiting for later jobs
    rel.clock.advance(60)
    second = JobSpecification("debounced", {"key": "Paris", "rev": 2})
    group.push(second)
    rel.drain(until=rel.clock.now() + 1)
    assert results(rel, second.id)[-1].outcome is Outcome.DELAYED
    # When an operator redrives A during B's wait
    if how == "copy":
        redrive(rel.sqs, rel.wiring.directory, resolve_scope(rel.declaration, "debounced"))
    else:
        assert native_redrive(rel, "debounced") == 1
    rel.drain()
    # Then B, pushed later, runs; A is debounced by B (a true reason), not B by A
    assert runs(second.id) == 1, [(r.job_id, r.outcome, r.reason) for r in rel.results.results]
    assert final(rel, first.id).outcome is Outcome.DEBOUNCED
    assert final(rel, first.id).reason == f"job enwiki/{second.id} was pushed later"


# -- two pushes of one job ID run once ---------------------------------------------------------------


def test_a_debounced_job_pushed_twice_under_one_id_runs_once(rel: LocalStack) -> None:
    # Given one job pushed twice with the same ID, 2 s apart (a retried request)
    group = rel.queue_group("enwiki")
    job = JobSpecification("debounced", {"key": "Paris"}, id="edit-42")
    group.push(job)
    rel.clock.advance(2)
    group.push(job)
    rel.drain()
    # Then it ran once, and the other push says why it did not
    assert runs(job.id) == 1, [(r.outcome, r.reason) for r in rel.results.results]
    debounced = [r for r in results(rel, job.id) if r.outcome is Outcome.DEBOUNCED]
    assert [r.reason for r in debounced] == ["another delivery of this job ID owns the run"]


@pytest.mark.parametrize("round_", range(5))
def test_a_second_push_that_registers_in_the_batch_its_first_claims_in_does_not_run_it_again(
    rel: LocalStack, round_: int
) -> None:
    # Found by the reliability model. Given edit-42 for Paris, registered and waiting
    group = rel.queue_group("enwiki")
    job = JobSpecification("debounced", {"key": "Paris"}, id="edit-42", enqueued_at=START)
    group.push(job)
    rel.drain(until=START + 0.5)
    # When a second push of it (its producer retried the request: the same enqueue time)
    # reaches the runner in the batch where the first comes back to claim its run, late
    # enough that a window it opened would not wait
    rel.clock.advance_to(START + 60)
    group.push(JobSpecification("debounced", {"key": "Paris"}, id="edit-42", enqueued_at=START))
    rel.drain()
    # Then it ran once: the second push registered first, and was debounced by the first
    # (claiming first, the first would have left a run of its own ID for the second to reopen)
    assert runs(job.id) == 1, table(rel)
    assert [r.reason for r in results(rel, job.id) if r.outcome is Outcome.DEBOUNCED] == [
        "another delivery of this job ID owns the run"
    ]


# -- the hold clock measures the current hold ----------------------------------------------------------


def test_attempts_between_holds_do_not_count_as_time_held_back(rel: LocalStack) -> None:
    # Given a job held 40 s by a dead container's lease, that then fails twice
    leases = Leases(rel.records.table)
    leases.acquire("limited", "=a", 1, now=START, until=START + 40)
    job = JobSpecification("limited", {"key": "a", "script": {"fail": 2}})
    rel.queue_group("enwiki").push(job)
    while runs(job.id, "failed") < 2:
        rel.drain(until=rel.clock.now() + 0.5)
    # When another dead container holds the key until 100 s after the first hold began
    leases.acquire("limited", "=a", 1, now=rel.clock.now(), until=START + 100)
    rel.drain()
    # Then its third attempt was held back (less than max_held_s of 60 s in this hold)
    # and ran; it was not dead-lettered as held for over 60 s with an attempt left
    outcomes = [r.outcome for r in results(rel, job.id)]
    assert Outcome.DEAD_LETTERED not in outcomes, [(r.outcome, r.reason, r.error) for r in results(rel, job.id)]
    assert outcomes.count(Outcome.LIMITED) >= 2
    assert runs(job.id) == 1


def test_a_forged_hold_attribute_cannot_claim_a_hold_before_the_job_was_sent(rel: LocalStack) -> None:
    # Given a key that is busy for 20 s, and a job sent with a forged jobkit.held ("held for a day")
    Leases(rel.records.table).acquire("limited", "=a", 1, now=START, until=START + 20)
    job = JobSpecification("limited", {"key": "a"}, domain="enwiki")
    now = rel.clock.now()
    rel.sqs.send_message(
        QueueUrl=rel.queue_url("limited"),
        MessageBody=job.stamped(now).to_message(),
        MessageAttributes={"jobkit.held": {"DataType": "String", "StringValue": f"0 {now - 100_000!r} {now!r}"}},
    )
    rel.drain()
    # Then it is held as long as the key is busy, and runs: no hold began before SQS saw it
    assert final(rel, job.id).outcome is Outcome.SUCCEEDED, table(rel)
    assert runs(job.id) == 1


def test_a_deferred_copy_moved_by_sqs_and_redriven_natively_starts_its_attempts_again(rel: LocalStack) -> None:
    # Given a job that failed once and was then held back (a deferral: its copy points at
    # the attempts it used), whose held copy's invocations all die (killed, never reported)
    job = JobSpecification("limited", {"key": "a", "script": {"fail": 1}})
    rel.queue_group("enwiki").push(job)
    rel.drain(until=START + 1)  # attempt 1 fails
    Leases(rel.records.table).acquire("limited", "=a", 1, now=rel.clock.now(), until=rel.clock.now() + 30)
    rel.drain(until=rel.clock.now() + 10)  # attempt 2 meets the lease: held
    assert results(rel, job.id)[-1].outcome is Outcome.LIMITED
    url = rel.queue_url("limited")
    for _ in range(rel.declaration.queues["limited"].max_receive_count + 1):
        rel.clock.advance(61)  # each receive dies; the next one past maxReceiveCount moves it to the DLQ
        rel.sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], VisibilityTimeout=60)
    dead = rel.dead_letters("limited")
    assert [m["MessageAttributes"].keys() >= {"jobkit.deferred", "jobkit.held"} for m in dead] == [True]
    # When SQS's own redrive (StartMessageMoveTask) moves it back, with every attribute
    rel.clock.advance(3600)
    assert native_redrive(rel, "limited") == 1
    redriven_at = rel.clock.now()
    rel.drain()
    # Then it starts its attempts again (its script fails attempt 1 again): the deferral
    # record belongs to the message SQS moved, not to the new one
    assert [run.attempt for run in SCRIPTED if run.job_id == job.id and run.started_at >= redriven_at] == [1, 2]
    assert final(rel, job.id).outcome is Outcome.SUCCEEDED


def test_a_natively_redriven_held_copy_starts_a_new_hold(rel: LocalStack) -> None:
    # Given a held copy (its attribute says since when) that SQS moved to the DLQ
    # itself, its receives spent by invocations that died before reporting
    leases = Leases(rel.records.table)
    busy = leases.acquire("limited", "=a", 1, now=START, until=START + 86_400)
    job = JobSpecification("limited", {"key": "a"})
    rel.queue_group("enwiki").push(job)
    rel.drain(until=START + 0.5)
    assert [r.outcome for r in results(rel, job.id)] == [Outcome.LIMITED]
    url = rel.queue_url("limited")
    while rel.queue_depth("limited", dlq=True) == 0:
        rel.clock.advance(61)
        rel.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=1)
        rel.clock.advance(2)
    # When an operator redrives the whole DLQ natively two hours later (the attribute
    # goes with the message), while the key is still busy
    rel.clock.advance(7200)
    assert native_redrive(rel, "limited") == 1
    rel.drain(until=rel.clock.now() + 30)
    # Then the redriven job is held back afresh, not dead-lettered as held for two hours
    assert [r.outcome for r in results(rel, job.id)][-1] is Outcome.LIMITED
    assert rel.queue_depth("limited", dlq=True) == 0
    assert isinstance(busy, Lease) and leases.release(busy)  # then the key is free
    rel.drain()
    assert runs(job.id) == 1
