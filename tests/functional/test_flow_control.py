"""Flow control on moto: concurrency limits, rate limits and debounce, each
through the local stack's runners and the jobs table, including what each
does when the table fails. docs/flow-control.md states the semantics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import click
import pytest
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli.ops import register_ops_commands
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration, load_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.records.leases import Leases
from jobkit.sqs import DEBOUNCE_ATTRIBUTE, string_attribute

import flowjobs
from conftest import FIXTURES, START, RequestCounter
from faults import FailCalls


@pytest.fixture(scope="module")
def flow_declaration() -> Declaration:
    return load_declaration(FIXTURES / "flow.toml")


@pytest.fixture
def flow(flow_declaration: Declaration) -> Iterator[LocalStack]:
    with LocalStack(flow_declaration, clock=VirtualClock(START), seed=1) as local:
        flowjobs.reset()
        yield local
        flowjobs.reset()


def outcomes(stack: LocalStack, job_id: str) -> list[Outcome]:
    return [r.outcome for r in stack.results.results if r.job_id == job_id]


def nothing_left(stack: LocalStack) -> bool:
    return all(stack.queue_depth(q) == 0 and stack.queue_depth(q, dlq=True) == 0 for q in stack.declaration.queues)


# -- concurrency ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2])
def test_at_most_limit_jobs_of_a_domain_run_at_once(flow_declaration: Declaration, limit: int) -> None:
    declaration = flow_declaration
    if limit != 1:  # the control: with room for two, the second runs beside the first
        from dataclasses import replace

        from jobkit.flow.options import ConcurrencyLimit, FlowKey

        limited = replace(declaration.types["limited"], concurrency=ConcurrencyLimit(FlowKey("domain"), limit))
        declaration = replace(declaration, types={**declaration.types, "limited": limited})
    with LocalStack(declaration, clock=VirtualClock(START), seed=1) as stack:
        flowjobs.reset()
        a1, a2 = JobSpecification("limited", {"n": 1}), JobSpecification("limited", {"n": 2})
        b1 = JobSpecification("limited", {"n": 3})
        stack.queue_group("a").push([a1, a2])
        stack.queue_group("b").push(b1)
        # While a1 runs, another container takes the next messages
        flowjobs.DURING.append(stack.poll_once)
        stack.drain()
        assert sorted(job_id for _, job_id, _ in flowjobs.RUNS) == sorted([a1.id, a2.id, b1.id])
        assert flowjobs.PEAK["a"] == limit
        assert flowjobs.PEAK["b"] == 1
        if limit == 1:
            assert outcomes(stack, a2.id) == [Outcome.LIMITED, Outcome.SUCCEEDED]
            held = next(r for r in stack.results.results if r.outcome is Outcome.LIMITED)
            assert held.reason == "concurrency limit 1 reached for domain=a"
        assert nothing_left(stack)
        # every lease was given back
        assert Leases(stack.records.table).holders("limited", "=a") == {}


def test_a_lease_whose_holder_died_is_reclaimed_at_its_deadline(flow: LocalStack) -> None:
    # Given a container that took domain a's only lease and died, its Lambda deadline 120 s away
    leases = Leases(flow.records.table)
    leases.acquire("limited", "=a", 1, now=START, until=START + 120)
    job = JobSpecification("limited", {"n": 1})
    flow.queue_group("a").push(job)
    flow.drain(until=START + 100)
    # Then the job was held back, not run, while the lease was live
    assert flowjobs.RUNS == []
    assert set(outcomes(flow, job.id)) == {Outcome.LIMITED}
    # And it runs once the dead container's deadline passed
    flow.drain()
    assert [job_id for _, job_id, _ in flowjobs.RUNS] == [job.id]
    assert leases.holders("limited", "=a") == {}
    assert flow.records.table.get(("limited#lease#=a", "-"))["held"] == 0  # type: ignore[index]


def test_a_job_held_longer_than_max_held_s_is_dead_lettered_with_the_reason(flow: LocalStack) -> None:
    Leases(flow.records.table).acquire("heldShort", "=ops@example.org", 1, now=START, until=START + 3600)
    job = JobSpecification("heldShort", {"mailbox": "ops@example.org"})
    flow.queue_group("enwiki").push(job)
    flow.drain()
    assert flowjobs.RUNS == []
    assert outcomes(flow, job.id)[-1] is Outcome.DEAD_LETTERED
    assert set(outcomes(flow, job.id)[:-1]) == {Outcome.LIMITED}
    (dead,) = flow.dead_letters("heldShort")
    attributes = dead["MessageAttributes"]
    assert attributes["jobkit.reason"]["StringValue"] == "held_too_long"
    assert "max_held_s of 60" in attributes["jobkit.error"]["StringValue"]
    assert "params.mailbox=ops@example.org" in attributes["jobkit.error"]["StringValue"]
    # the runner's own record says why, for the DLQ tools
    (failure,) = flow.records.runs("heldShort", job.id, 5, "enwiki")["enwiki"].failures
    assert failure.dead_letter_reason == "held_too_long"
    # and the DLQ tools show it as the verified reason, explained
    flow.clock.advance(1)  # moto shows a message again once the clock has passed its visibility
    (listed,) = _dlq_list(flow, "heldShort")
    assert (listed["reason"], listed["verified"]) == ("held_too_long", True)
    assert "max_held_s" in listed["explanation"]


def test_a_limit_fails_closed_by_default_and_open_when_declared(flow: LocalStack) -> None:
    # Given a table that throttles every write for a while
    fault = FailCalls(flow.dynamodb, "dynamodb.UpdateItem", code="ThrottlingException", times=4)
    closed = JobSpecification("limited", {"n": 1})
    opened = JobSpecification("limitedOpen", {"n": 2})
    flow.queue_group("a").push([closed, opened])
    flow.drain()
    # Then the fail-closed job was held back while the table failed, and ran after
    assert outcomes(flow, closed.id)[0] is Outcome.LIMITED
    assert outcomes(flow, closed.id)[-1] is Outcome.SUCCEEDED
    # and the fail-open one ran at once, counted as run without the table
    first = next(r for r in flow.results.results if r.job_id == opened.id)
    assert first.outcome is Outcome.SUCCEEDED and first.dedup_unavailable
    assert fault.remaining == 0
    assert sorted(job_id for _, job_id, _ in flowjobs.RUNS) == sorted([closed.id, opened.id])
    assert nothing_left(flow)


def _dlq_list(stack: LocalStack, target: str) -> list[dict[str, Any]]:
    group = click.Group("jobkit")
    register_ops_commands(group)
    config = CliConfig(config_path=FIXTURES / "flow.toml", clock=stack.clock)
    result = CliRunner().invoke(group, ["dlq", "list", target, "--json"], obj=config, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    messages: list[dict[str, Any]] = json.loads(result.stdout)["messages"]
    return messages


# -- rate limits --------------------------------------------------------------------------------


def test_jobs_of_a_key_start_no_faster_than_the_rate_limit(flow: LocalStack) -> None:
    jobs = [JobSpecification("rated", {"n": n}) for n in range(20)]
    others = [JobSpecification("rated", {"n": n}) for n in range(4)]
    flow.queue_group("a").push(jobs)
    flow.queue_group("b").push(others)
    flow.drain()
    assert sorted(job_id for _, job_id, _ in flowjobs.RUNS) == sorted(j.id for j in jobs + others)
    starts = sorted(r.started_at for r in flow.results.results if r.domain == "a" and r.started_at is not None)
    assert len(starts) == 20
    # in any window of w seconds, at most burst + rate * w jobs of the key started
    for i, first in enumerate(starts):
        for j in range(i, len(starts)):
            window = starts[j] - first
            assert j - i + 1 <= 2 + 2 * window + 1e-6, (i, j, window)
    # and the limit was binding: 20 jobs at 2/s after a burst of 2 take about 9 s
    assert starts[-1] - starts[0] >= 8.9
    assert nothing_left(flow)


def test_a_full_batch_of_one_key_takes_its_tokens_in_one_request(flow: LocalStack) -> None:
    requests = RequestCounter(flow.dynamodb)
    flow.queue_group("a").push([JobSpecification("ratedOpen", {"n": n}) for n in range(10)])
    flow.drain()
    assert [r.outcome for r in flow.results.results] == [Outcome.SUCCEEDED] * 10
    assert requests.calls == {"UpdateItem": 1}  # 0.1 requests per job


def test_a_batch_over_the_bucket_takes_what_is_left_in_a_second_request(flow: LocalStack) -> None:
    requests = RequestCounter(flow.dynamodb)
    flow.queue_group("a").push([JobSpecification("ratedOpen", {"n": n}) for n in range(10)])
    flow.queue_group("b").push([JobSpecification("ratedOpen", {"n": n}) for n in range(10)])
    flow.poll_once()  # one batch of each: the second finds the bucket (burst 10, key "type") empty
    first_round = [r.outcome for r in flow.results.results]
    assert first_round.count(Outcome.SUCCEEDED) == 10 and first_round.count(Outcome.LIMITED) == 10
    assert requests.calls["UpdateItem"] <= 3  # 20 jobs: 1 take that got 10, then 1 or 2 that got none
    flow.drain()
    assert len(flowjobs.RUNS) == 20


# -- debounce ----------------------------------------------------------------------------------


def test_of_jobs_pushed_within_the_wait_only_the_latest_runs(flow: LocalStack) -> None:
    group = flow.queue_group("enwiki")
    pushed = []
    for n in range(5):
        spec = JobSpecification("debounced", {"page": "Main_Page", "edit": n})
        group.push(spec)
        pushed.append(spec)
        flow.drain(until=flow.clock.now() + 5)  # 5 s apart: each within 30 s of the one before
    other = JobSpecification("debounced", {"page": "Other"})
    group.push(other)
    flow.drain()
    ran = [job_id for _, job_id, _ in flowjobs.RUNS]
    assert ran == [pushed[-1].id, other.id] or ran == [other.id, pushed[-1].id]
    for earlier in pushed[:-1]:
        result = [r for r in flow.results.results if r.job_id == earlier.id][-1]
        assert result.outcome is Outcome.DEBOUNCED
        assert result.reason == f"job enwiki/{pushed[-1].id} was pushed later"
    # the latest ran about 30 s after it was pushed, not at once
    last = next(r for r in flow.results.results if r.job_id == pushed[-1].id and r.ran)
    assert last.started_at is not None and 30 <= last.started_at - (START + 20) <= 32
    assert nothing_left(flow)


def test_a_batch_of_one_key_is_debounced_at_once_by_its_latest(flow: LocalStack) -> None:
    requests = RequestCounter(flow.dynamodb)
    specs = [JobSpecification("debounced", {"page": "P", "n": n}) for n in range(5)]
    flow.queue_group("enwiki").push(specs)
    flow.drain()
    assert [job_id for _, job_id, _ in flowjobs.RUNS] == [specs[-1].id]
    assert sum(1 for r in flow.results.results if r.outcome is Outcome.DEBOUNCED) == 4
    assert requests.calls == {"UpdateItem": 2}  # one register for the batch, one claim on its return


def test_a_steady_stream_still_runs_every_max_wait(flow: LocalStack) -> None:
    group = flow.queue_group(None)
    for _ in range(30):  # one push every 10 s for 5 minutes: always within the 30 s wait
        group.push(JobSpecification("debounced", {"page": "Busy"}))
        flow.drain(until=flow.clock.now() + 10)
    flow.drain()
    starts = sorted(r.started_at for r in flow.results.results if r.ran and r.started_at is not None)
    assert len(starts) >= 3
    gaps = [later - earlier for earlier, later in zip([START, *starts], starts, strict=False)]
    assert max(gaps) <= 120 + 30 + 2, gaps  # max_wait_s, plus at most one wait for the job that forces it
    results = flow.results.results
    assert sum(1 for r in results if r.outcome is Outcome.DEBOUNCED) + len(starts) == 30


def test_a_sender_cannot_debounce_a_job_by_setting_the_attribute(flow: LocalStack) -> None:
    spec = JobSpecification("debounced", {"page": "P"}, domain="enwiki").stamped(START)
    flow.sqs.send_message(
        QueueUrl=flow.queue_urls["flow-debounced"],
        MessageBody=spec.to_message(),
        MessageAttributes={DEBOUNCE_ATTRIBUTE: string_attribute("1"), "JobType": string_attribute("debounced")},
    )
    flow.drain()
    assert [job_id for _, job_id, _ in flowjobs.RUNS] == [spec.id]


def test_debounce_fails_open_by_default_and_closed_when_declared(flow: LocalStack) -> None:
    fault = FailCalls(flow.dynamodb, "dynamodb.UpdateItem", code="InternalServerError", status=500, times=3)
    opened = [JobSpecification("debounced", {"page": "P", "n": n}) for n in range(2)]
    flow.queue_group("a").push(opened)
    flow.drain()
    # Fail-open: without the table, nothing is debounced; both ran
    assert sorted(job_id for _, job_id, _ in flowjobs.RUNS) == sorted(s.id for s in opened)
    assert fault.remaining < 3
    flowjobs.reset()
    fault.remaining = 3
    closed = JobSpecification("debouncedClosed", {"page": "P"})
    flow.queue_group("a").push(closed)
    flow.drain()
    assert outcomes(flow, closed.id)[0] is Outcome.LIMITED
    assert outcomes(flow, closed.id)[-1] is Outcome.SUCCEEDED
    assert nothing_left(flow)


# -- all of it ------------------------------------------------------------------------------------


def test_every_option_at_once_loses_nothing(flow: LocalStack) -> None:
    group = flow.queue_group("a")
    specs = [JobSpecification("everything", {"page": f"P{n % 4}"}) for n in range(40)]
    for n in range(0, 40, 8):
        group.push(specs[n : n + 8])
        flow.drain(until=flow.clock.now() + 3)
    flow.drain()
    final = {}
    for result in flow.results.results:
        if result.outcome.is_final:
            assert result.job_id not in final, "a job ended twice"
            final[result.job_id] = result.outcome
    assert set(final) == {s.id for s in specs}
    assert set(final.values()) <= {Outcome.SUCCEEDED, Outcome.DEBOUNCED, Outcome.DUPLICATE}
    ran = [job_id for _, job_id, _ in flowjobs.RUNS]
    assert len(ran) == len(set(ran)) == sum(1 for o in final.values() if o is Outcome.SUCCEEDED)
    assert flowjobs.PEAK["a"] == 1
    assert nothing_left(flow)


# -- what a hostile or careless producer, or bad timing, must not break ---------------------------


def test_a_future_enqueue_time_does_not_silence_a_debounce_key(flow: LocalStack) -> None:
    # A sender forges the runner's enqueue-time attribute a year ahead; another's clock runs 290 s fast
    forged = JobSpecification("debounced", {"page": "Main"}, domain="evil").stamped(START)
    flow.sqs.send_message(
        QueueUrl=flow.queue_urls["flow-debounced"],
        MessageBody=forged.to_message(),
        MessageAttributes={
            "jobkit.enqueuedAt": {"DataType": "Number", "StringValue": str(START + 365 * 86400)},
            "JobType": string_attribute("debounced"),
        },
    )
    fast = JobSpecification("debounced", {"page": "Main"}, domain="dewiki").stamped(START + 290)
    flow.queue_group("dewiki").push(fast)
    flow.drain(until=START + 100)
    # Then honest edits pushed later, each after the last ran, all run
    later = []
    for n in range(3):
        spec = JobSpecification("debounced", {"page": "Main", "edit": n})
        flow.queue_group("enwiki").push(spec)
        later.append(spec)
        flow.drain(until=flow.clock.now() + 600)
    ran = {job_id for _, job_id, _ in flowjobs.RUNS}
    assert {s.id for s in later} <= ran, [outcomes(flow, s.id) for s in later]


def test_a_held_deliver_once_job_is_not_blocked_by_its_own_claim(flow: LocalStack) -> None:
    first, second = JobSpecification("onceLimited", {"n": 1}), JobSpecification("onceLimited", {"n": 2})
    flow.queue_group("a").push([first, second])
    flowjobs.DURING.append(flow.poll_once)  # while the first runs, another container takes the second
    flow.drain()
    assert outcomes(flow, second.id)[0] is Outcome.LIMITED
    assert Outcome.DEFERRED not in outcomes(flow, second.id)  # no claim of its own in its way
    (run,) = [r for r in flow.results.results if r.job_id == second.id and r.ran]
    assert run.started_at is not None and run.started_at - START < 10  # back within its backoff, not a lease


def test_a_held_deliver_once_job_is_dead_lettered_after_max_held_s(flow: LocalStack) -> None:
    Leases(flow.records.table).acquire("onceLimited", "=a", 1, now=START, until=START + 3600)
    job = JobSpecification("onceLimited", {"n": 1})
    flow.queue_group("a").push(job)
    flow.drain()
    assert outcomes(flow, job.id)[-1] is Outcome.DEAD_LETTERED and flowjobs.RUNS == []
    (dead,) = flow.dead_letters("onceLimited")
    assert dead["MessageAttributes"]["jobkit.reason"]["StringValue"] == "held_too_long"
    assert dead["MessageAttributes"]["jobkit.attempts"]["StringValue"] == "0"  # no attempt ever ran


def test_a_batch_of_root_jobs_shares_one_lease(flow: LocalStack) -> None:
    keys: list[str] = []
    flow.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem", lambda params, **_: keys.append(params["Key"]["pk"]["S"])
    )
    roots = [JobSpecification("rootLimited", {"n": n, **new_root_job_params(f"r{n}", START)}) for n in range(4)]
    flow.queue_group("a").push(roots)
    flow.drain()
    assert [r.outcome for r in flow.results.results] == [Outcome.SUCCEEDED] * 4
    # root jobs are admitted one at a time (each advances its root just before it runs),
    # but the batch's lease was taken with the batch: one take, one give-back
    assert [k for k in keys if "#lease#" in k] == ["rootLimited#lease#=a"] * 2


def test_jobs_that_start_late_behind_a_slow_one_take_tokens_of_their_own(flow: LocalStack) -> None:
    group = flow.queue_group("a")
    first = [JobSpecification("slowRated", {"n": n}) for n in range(5)]
    more = [JobSpecification("slowRated", {"n": n}) for n in range(5, 15)]
    group.push(first)

    def slow_then_another_container() -> None:
        flow.clock.advance(10)  # the first job runs for 10 s; then another container takes a batch
        group.push(more)
        flow.poll_once()

    flowjobs.DURING.append(slow_then_another_container)
    flow.drain()
    assert len(flowjobs.RUNS) == 15
    starts = sorted(r.started_at for r in flow.results.results if r.started_at is not None)
    for i, begin in enumerate(starts):
        within = [s for s in starts[i:] if s - begin <= 0.5]
        assert len(within) <= 5 + 1 * (0.5 + 1), (begin, within)  # burst + rate * (window + a token's freshness)


def test_a_steady_stream_never_runs_two_jobs_of_a_key_at_once(flow: LocalStack) -> None:
    for _ in range(30):  # an edit every 3 s, under the 5 s wait; windows of 20 s
        flow.queue_group("enwiki").push(JobSpecification("debouncedStream", {"page": "Main"}))
        flow.drain(until=flow.clock.now() + 3)
    flow.drain()
    starts = sorted(r.started_at for r in flow.results.results if r.ran and r.started_at is not None)
    assert len(starts) >= 4
    assert all(later - earlier >= 1 for earlier, later in pairwise(starts)), starts


def test_a_very_high_rate_never_grants_more_than_the_burst(flow: LocalStack) -> None:
    from jobkit.flow.options import FlowKey, RateLimit
    from jobkit.records.token_buckets import TokenBuckets

    buckets = TokenBuckets(flow.records.table)
    limit = RateLimit(FlowKey("type"), per_second=100_000, burst=1)
    assert buckets.take("ratedOpen", "*", limit, 5, now=START).granted == 1
