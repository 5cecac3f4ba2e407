"""A type's ``batch_concurrency``: the jobs of one batch run side by side, on
the local stack's runners, and every outcome is what a sequential batch gives.

Jobs prove they ran together by meeting at a barrier (real time): ten jobs
that each wait for the ten to arrive can only all succeed if they run at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack

import testjobs
from conftest import FIXTURES, START
from testjobs import SCRIPTED, SimulatedCrash

SCRIPTED_JOB = "testjobs:ScriptedJob"


def declaration(batch_concurrency: int) -> Declaration:
    types: dict[str, Any] = {
        "waits": {"class": SCRIPTED_JOB, "batch_size": 10, "batch_concurrency": batch_concurrency},
        "twin": {
            "class": SCRIPTED_JOB,
            "queue": "waits",
            "batch_concurrency": batch_concurrency,
            "remove_duplicates": True,
            "remove_duplicates_ignore_params": ["script", "n"],
        },
        "once": {"class": SCRIPTED_JOB, "queue": "waits", "deliver_once": True, "max_attempts": 2},
        "leaf": {"class": SCRIPTED_JOB, "queue": "waits", "batch_concurrency": batch_concurrency, "pushes": ["leaf"]},
        "limited": {
            "class": SCRIPTED_JOB,
            "queue": "waits",
            "batch_concurrency": batch_concurrency,
            "concurrency": {"key": "params.key", "limit": 1},
        },
        "tracked": {
            "class": SCRIPTED_JOB,
            "queue": "waits",
            "batch_concurrency": batch_concurrency,
            "track_status": True,
        },
    }
    raw = {
        "jobkit": {"prefix": "side"},
        "defaults": {"timeout_s": 10, "backoff": {"base_s": 2, "factor": 2.0, "cap_s": 30, "jitter": 0.5}},
        "types": types,
    }
    return parse_declaration(raw, source="side-by-side test", base_dir=FIXTURES)


def _clear() -> None:
    SCRIPTED.clear()
    testjobs.BARRIERS.clear()
    testjobs.ACTIVE.clear()
    testjobs.MOST_ACTIVE.clear()


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    _clear()
    yield
    _clear()


def stack(batch_concurrency: int) -> LocalStack:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    return LocalStack(declaration(batch_concurrency), clock=clock, seed=5)


def meeting(parties: int, timeout_s: float) -> dict[str, Any]:
    return {"meet": {"name": "batch", "parties": parties, "timeout_s": timeout_s}}


def test_a_batch_of_waiting_jobs_runs_side_by_side() -> None:
    # Given a type with batch_concurrency = 10, and a batch of 10 jobs that each wait
    # (up to 5 s of real time) until all 10 are waiting
    with stack(10) as local:
        specs = [JobSpecification("waits", {"n": n, "script": meeting(10, 5)}) for n in range(10)]
        local.queue_group().push(specs)
        began = time.perf_counter()
        local.drain()
        took = time.perf_counter() - began
        # Then all 10 met, in one batch: they ran at once (about the time of one)
        outcomes = [(r.job_id, r.outcome) for r in local.results.results]
        assert sorted(outcomes) == sorted((s.id, Outcome.SUCCEEDED) for s in specs), outcomes
        assert len({r.attempt for r in SCRIPTED}) == 1 and len(SCRIPTED) == 10
        # and each ran as itself: the runner marked its own job running in its thread,
        # and its correlation ID (its own ID: it was pushed without one) was in scope
        assert {run.running for run in SCRIPTED} == {("waits", s.id) for s in specs}
        print(f"\n10 jobs that wait for each other: {took:.2f} s")


def test_the_default_runs_a_batch_one_job_after_another() -> None:
    # The control: with the default (1), two jobs that wait for each other never meet
    with stack(1) as local:
        specs = [JobSpecification("waits", {"n": n, "script": meeting(2, 0.2)}) for n in range(2)]
        local.queue_group().push(specs)
        local.drain(until=START + 1)
        assert {run.outcome for run in SCRIPTED if run.attempt == 1} == {"failed"}


def _mixed_batch(local: LocalStack) -> list[JobSpecification]:
    """One batch of everything whose outcome depends on order or on other jobs."""
    root = new_root_job_params("tpl", START - 5)
    stale = {k: v for k, v in new_root_job_params("tpl", START - 50).items() if k != "rootJobIsSelf"}
    specs = [
        JobSpecification("waits", {"n": 1, "script": {}}, id="plain-ok"),
        JobSpecification("waits", {"n": 2, "script": {"fail": 1}}, id="plain-retried"),
        JobSpecification("waits", {"n": 3, "script": {"permanent": True}}, id="plain-dead"),
        JobSpecification("twin", {"key": "k", "n": 1, "script": {}}, id="twin-1"),
        JobSpecification("twin", {"key": "k", "n": 2, "script": {}}, id="twin-2"),
        JobSpecification("once", {"n": 1, "script": {}}, id="once-1"),
        JobSpecification("leaf", {"n": 1, "script": {}, **stale}, id="stale-leaf"),
        JobSpecification("leaf", {"n": 2, "script": {"leaves": 2}, **root}, id="root-new"),
        JobSpecification("waits", {"n": 4, "script": {"fail": 2}}, id="plain-twice"),
        JobSpecification("once", {"n": 1, "script": {}}, id="once-1"),
    ]
    local.queue_group().push(specs)
    return specs


def _ended(local: LocalStack) -> list[tuple[str, str, int, str | None]]:
    return sorted(
        (r.job_id or "", r.outcome.value, r.attempt, r.reason)
        for r in local.results.results
        if r.job_id is not None and not r.job_id.startswith("root-new-")  # its leaves get IDs derived from its own
    )


def test_every_outcome_of_a_mixed_batch_is_what_a_sequential_batch_gives() -> None:
    # Given one batch of 10 that holds successes, retries, a dead letter, twins,
    # a deliver_once job pushed twice, a stale leaf and a newer root with leaves
    ended = {}
    for batch_concurrency in (1, 10):
        with stack(batch_concurrency) as local:
            _mixed_batch(local)
            local.drain()
            ended[batch_concurrency] = (
                _ended(local),
                sorted((q, local.queue_depth(q, dlq=True)) for q in local.declaration.queues),
                sorted(run.outcome for run in SCRIPTED),
            )
        SCRIPTED.clear()
    # Then side by side, every job ended as it did one after another
    assert ended[10] == ended[1]
    outcomes = {job_id: outcome for job_id, outcome, _, _ in ended[10][0]}
    assert outcomes["plain-dead"] == "dead_lettered" and outcomes["stale-leaf"] == "superseded"


def test_a_crash_beside_other_jobs_ends_the_invocation_unreported() -> None:
    # Given a batch of 4 side by side, one of which kills its invocation on its first attempt
    with stack(10) as local:
        specs = [JobSpecification("waits", {"n": n, "script": {}}) for n in range(3)]
        crash = JobSpecification("waits", {"n": 9, "script": {"crash": [1]}})
        local.queue_group().push([*specs, crash])
        # When the batch runs: the crash escapes, once the jobs beside it ended
        with pytest.raises(SimulatedCrash):
            local.drain(until=START + 1)
        assert not local.results.results, "the invocation reported nothing"
        # Then, delivered again, every job ends: none is lost
        local.drain()
        final = {r.job_id: r.outcome for r in local.results.results}
        assert final == {s.id: Outcome.SUCCEEDED for s in [*specs, crash]}


def test_a_type_with_a_concurrency_limit_runs_a_batch_one_job_at_a_time() -> None:
    # Given batch_concurrency = 10 on a type limited to one job per key at once (one
    # lease per key covers the batch's jobs), and on a type without a limit (the control)
    with stack(10) as local:
        jobs = [JobSpecification("limited", {"key": "acct", "n": n, "script": {"hold_s": 0.05}}) for n in range(5)]
        jobs += [JobSpecification("waits", {"key": "free", "n": n, "script": {"hold_s": 0.05}}) for n in range(5)]
        local.queue_group().push(jobs)
        local.drain()
        # Then the limited jobs never overlapped, and the others ran at once
        assert {r.outcome for r in local.results.results} == {Outcome.SUCCEEDED}
        assert testjobs.MOST_ACTIVE == {"acct": 1, "free": 5}


@pytest.mark.parametrize("round_", range(3))
def test_a_job_beside_one_that_overruns_the_deadline_is_never_handed_back(round_: int) -> None:
    # Found by hostile review. Given a batch in which one job hangs past the Lambda
    # deadline (the invocation is stopped) while others run beside it
    with stack(10) as local:
        specs = [
            JobSpecification("tracked", {"n": 1, "script": {}}, id="s1"),
            JobSpecification("once", {"n": 2, "script": {}}, id="o1"),
            JobSpecification("limited", {"n": 3, "key": "k", "script": {}}, id="l1"),
            JobSpecification("tracked", {"n": 4, "script": {"hang": [1]}}, id="hang"),
            JobSpecification("tracked", {"n": 5, "script": {}}, id="s2"),
        ]
        local.queue_group().push(specs)
        copies: list[str] = []
        local.sqs.meta.events.register(
            "before-call.sqs.SendMessage", lambda params, **_: copies.append(str(params.get("MessageBody")))
        )
        with pytest.raises(SimulatedCrash):
            local.drain(until=START + 1)
        # Then the stopped invocation sent no job back for lack of time: a copy sent
        # while a job beside it overran would run too, and so would the original,
        # delivered again after the stop
        assert copies == []
        # and, delivered again, every job ends
        local.drain()
        assert {r.job_id for r in local.results.results if r.outcome.is_final} == {s.id for s in specs}
