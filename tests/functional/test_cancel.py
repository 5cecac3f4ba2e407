"""Cancellation and status, on the local stack's queues, table and runners:
``group.cancel``, ``group.cancel_all``, ``self.cancelled()``, ``group.status``,
``group.wait``, and a redriven cancelled job."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobkit import Job, JobSpecification, JobWaitTimeout, NotCancellable, UnknownJobType
from jobkit.cli.__main__ import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobKitError
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.records import JobState, TableUnavailable

import testjobs
from conftest import START, RequestCounter, string_like
from testjobs import SCRIPTED

DECLARATION = """
[jobkit]
prefix = "cancel"

[defaults]
timeout_s = 60
backoff = { base_s = 2, factor = 2.0, cap_s = 30, jitter = 0.5 }

[types.report]
class = "testjobs:ScriptedJob"
cancellable = true
track_status = true
max_attempts = 2

[types.mail]
class = "testjobs:ScriptedJob"
queue = "report"
cancellable = true
max_attempts = 2

[types.plain]
class = "testjobs:ScriptedJob"
queue = "report"

[types.once]
class = "testjobs:ScriptedJob"
queue = "report"
cancellable = true
deliver_once = true

[types.digest]
class = "testjobs:ScriptedJob"
queue = "report"
cancellable = true
debounce = { key = "params.user", wait_s = 3, max_wait_s = 30 }
"""


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    SCRIPTED.clear()
    testjobs.STEP_HOOKS.clear()
    yield
    SCRIPTED.clear()
    testjobs.STEP_HOOKS.clear()


@pytest.fixture
def local(jobs_toml: Path) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=3) as stack:
        yield stack


def outcomes(local: LocalStack) -> dict[str, Outcome]:
    return {r.job_id or "": r.outcome for r in local.results.results if r.outcome.is_final}


def test_a_cancelled_queued_job_never_runs(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push(
        [JobSpecification("report", {"script": {}}, id="r1"), JobSpecification("report", {"script": {}}, id="r2")]
    )
    # When r1 is cancelled before a runner receives it
    assert group.cancel("report", "r1", by="test") is True
    local.drain()
    # Then it never ran, ended cancelled with who and when, and r2 ran
    assert [run.job_id for run in SCRIPTED] == ["r2"]
    assert outcomes(local) == {"r1": Outcome.CANCELLED, "r2": Outcome.SUCCEEDED}
    cancelled = next(r for r in local.results.results if r.job_id == "r1")
    assert cancelled.reason is not None and cancelled.reason.startswith("cancelled by test at 2027-01-15T08:00:00")
    status = group.status("report", "r1")
    assert status is not None and status.state is JobState.CANCELLED and status.final
    assert status.cancelled_by == "test" and status.note == cancelled.reason
    # and cancelling it again says it had ended
    assert group.cancel("report", "r1", by="test") is False
    assert group.cancel("report", "r2", by="test") is False  # it ran


def test_a_job_delayed_by_a_day_is_cancelled_within_one_hop(local: LocalStack) -> None:
    group = local.queue_group()
    group.push(JobSpecification("mail", {"script": {}}, id="later", delay=86_400))
    local.drain(until=START + 3_600)  # four hops went by
    group.cancel("mail", "later")
    # Then it is gone by its next hop (at most 15 minutes), not after a day
    local.drain(until=START + 3_600 + 901)
    assert outcomes(local) == {"later": Outcome.CANCELLED}
    assert local.queue_depth("report") == 0 and not SCRIPTED


@pytest.mark.parametrize("raise_cancelled", [False, True])
def test_a_running_job_that_checks_stops_and_ends_cancelled(local: LocalStack, raise_cancelled: bool) -> None:
    group = local.queue_group("wiki")

    def cancel_at_step_two(job: Job, step: int) -> None:
        if step == 2:
            assert group.cancel("report", job.id, by="ops") is True  # it is running: not ended

    testjobs.STEP_HOOKS.append(cancel_at_step_two)
    script = {"steps": 10, "step_s": 3, "raise_cancelled": raise_cancelled}
    group.push(JobSpecification("report", {"script": script}, id="long"))
    local.drain()
    # Then it saw the cancellation within 5 s of it (its check reads at most every 5 s),
    # stopped, and ended cancelled: not failed, not retried
    assert [(run.outcome, run.attempt) for run in SCRIPTED] == [("cancelled", 1)]
    assert outcomes(local) == {"long": Outcome.CANCELLED}
    status = group.wait("report", "long", timeout_s=1)
    assert status.state is JobState.CANCELLED and status.note is not None and "cancelled by ops" in status.note


def test_a_job_cancelled_while_it_waits_for_its_turn_in_the_batch_never_starts(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    # Three jobs of one batch, each 9 s long; the third is cancelled while the first runs
    testjobs.STEP_HOOKS.append(lambda job, step: group.cancel("mail", "third") if job.id == "first" else None)
    group.push([JobSpecification("mail", {"script": {"steps": 3}}, id=i) for i in ("first", "second", "third")])
    local.drain()
    # Then it is checked again before it starts (its batch's check is over 5 s old), and never runs
    assert [run.job_id for run in SCRIPTED] == ["first", "second"]
    assert outcomes(local) == {"first": Outcome.SUCCEEDED, "second": Outcome.SUCCEEDED, "third": Outcome.CANCELLED}


def test_a_running_job_that_never_checks_runs_to_its_end(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    testjobs.STEP_HOOKS.append(lambda job, step: group.cancel("mail", job.id) if step == 0 else None)
    group.push(JobSpecification("plain", {"script": {"steps": 2}}, id="p"))  # not cancellable: never asks
    with pytest.raises(NotCancellable, match=r"plain: its jobs cannot be cancelled: declare cancellable = true"):
        group.cancel("plain", "p")
    group.push(JobSpecification("mail", {"script": {}}, id="m"))
    local.drain()
    assert outcomes(local) == {"p": Outcome.SUCCEEDED, "m": Outcome.SUCCEEDED}


def test_cancel_all_spares_the_jobs_pushed_after_its_time(local: LocalStack) -> None:
    group, other = local.queue_group("wiki"), local.queue_group("other")
    group.push([JobSpecification("mail", {"script": {}}, id=f"old-{n}") for n in range(3)])
    other.push(JobSpecification("mail", {"script": {}}, id="old-0"))  # another domain: spared
    local.clock.advance(10)
    cut = local.clock.now()
    local.clock.advance(10)
    group.push(JobSpecification("mail", {"script": {}}, id="new"))
    mark = group.cancel_all("mail", pushed_before=cut, by="ops")
    assert mark.before == cut
    # An earlier watermark never moves it back
    assert group.cancel_all("mail", pushed_before=cut - 100, by="ops").before == cut
    local.drain()
    ended = {(r.domain, r.job_id): r.outcome for r in local.results.results}
    assert ended == {
        ("wiki", "old-0"): Outcome.CANCELLED,
        ("wiki", "old-1"): Outcome.CANCELLED,
        ("wiki", "old-2"): Outcome.CANCELLED,
        ("wiki", "new"): Outcome.SUCCEEDED,
        ("other", "old-0"): Outcome.SUCCEEDED,
    }


def test_an_id_pushed_again_after_its_cancellation_is_another_job_and_runs(local: LocalStack) -> None:
    group = local.queue_group()
    group.push(JobSpecification("mail", {"script": {}}, id="same"))
    group.cancel("mail", "same")
    local.drain()
    local.clock.advance(1)
    group.push(JobSpecification("mail", {"script": {}}, id="same"))
    local.drain()
    assert [r.outcome for r in local.results.results] == [Outcome.CANCELLED, Outcome.SUCCEEDED]


@pytest.mark.parametrize("uncancel", [False, True])
def test_a_redriven_cancelled_job_stays_cancelled_unless_the_operator_lifts_it(
    local: LocalStack, jobs_toml: Path, uncancel: bool
) -> None:
    group = local.queue_group("wiki")
    group.push(JobSpecification("mail", {"script": {"fail": 2}}, id="dead"))
    local.drain()
    assert outcomes(local) == {"dead": Outcome.DEAD_LETTERED}
    # When it is cancelled in the DLQ (nothing says it ended: the type tracks no status)
    assert group.cancel("mail", "dead", by="app") is True
    # and redriven (with --uncancel: the operator lifts the cancellation)
    flags = ["--uncancel"] if uncancel else []
    result = jobkit(local, jobs_toml, "dlq", "redrive", "mail", *flags, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["moved"] == 1
    local.results.clear()
    SCRIPTED.clear()
    local.drain()
    # Then it stays cancelled; lifted, it runs again (and fails again: its script fails 2 attempts)
    assert outcomes(local) == {"dead": Outcome.DEAD_LETTERED if uncancel else Outcome.CANCELLED}
    assert len(SCRIPTED) == (2 if uncancel else 0)


def test_a_deliver_once_job_that_ran_is_known_to_have_ended(local: LocalStack) -> None:
    group = local.queue_group()
    group.push(JobSpecification("once", {"script": {}}, id="o"))
    assert group.cancel("once", "o") is True
    local.drain()
    group.push(JobSpecification("once", {"script": {}}, id="o2"))
    local.drain()
    assert group.cancel("once", "o2") is False  # its delivery claim says it ran


def test_status_and_wait(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    assert group.status("report", "nothing-yet") is None
    with pytest.raises(JobKitError, match=r"mail: jobkit keeps no status of its jobs: declare track_status"):
        group.status("mail", "m")
    group.push(JobSpecification("report", {"script": {"fail": 1}}, id="r"))
    with pytest.raises(JobWaitTimeout, match=r"report r: still not received yet after 0 s") as waited:
        group.wait("report", "r", timeout_s=0)
    assert waited.value.last is None
    local.drain(until=START + 1)  # the first attempt fails, and will be retried
    status = group.status("report", "r")
    assert status is not None and status.state is JobState.FAILED and status.will_retry and not status.final
    local.drain()
    status = group.wait("report", "r", timeout_s=1)
    assert status.state is JobState.SUCCEEDED and status.attempt == 2 and status.final
    # A job of that ID in another domain is another job: not readable from here
    assert local.queue_group("other").status("report", "r") is None


def test_bad_input_gets_a_clear_error_and_writes_nothing(local: LocalStack) -> None:
    group = local.queue_group()
    with pytest.raises(UnknownJobType, match="nope"):
        group.cancel("nope", "x")
    with pytest.raises(JobKitError, match=r"a job ID must match"):
        group.cancel("mail", "has#hash")
    with pytest.raises(JobKitError, match=r"say who cancels"):
        group.cancel("mail", "x", by=" ")
    with pytest.raises(JobKitError, match=r"pushed_before is 3600 s in the future: a watermark cancels"):
        group.cancel_all("mail", pushed_before=START + 3_600)
    with pytest.raises(JobKitError, match=r"in the future \(milliseconds\? give seconds\)"):
        group.cancel_all("mail", pushed_before=START * 1000)
    for bad in (float("nan"), float("inf"), -float("inf"), -5, True, "1800000000", 10**400):
        with pytest.raises(JobKitError, match=r"pushed_before must be epoch seconds"):
            group.cancel_all("mail", pushed_before=bad)  # type: ignore[arg-type]
    with pytest.raises(JobKitError, match=r"a domain is None \(the jobs without one\) or a non-empty string"):
        local.queue_group("").cancel("mail", "x")
    items = local.dynamodb.scan(TableName=local.declaration.table_name)["Items"]
    assert items == []


def test_with_the_table_unavailable_a_cancel_raises_and_queued_jobs_run(local: LocalStack) -> None:
    group = local.queue_group()
    group.push(JobSpecification("mail", {"script": {}}, id="m"))
    local.dynamodb.delete_table(TableName=local.declaration.table_name)
    with pytest.raises(TableUnavailable):
        group.cancel("mail", "m")
    local.drain()
    # The runner could not read cancellations: the job ran (fail-open), and says so
    [result] = local.results.results
    assert result.outcome is Outcome.SUCCEEDED and result.dedup_unavailable


def test_a_cancellable_type_costs_one_read_per_batch_and_others_none(local: LocalStack) -> None:
    dynamodb_requests = RequestCounter(local.dynamodb)
    group = local.queue_group()
    group.push([JobSpecification("mail", {"script": {}}, id=f"m{n}") for n in range(10)])
    dynamodb_requests.reset()
    local.drain()
    assert outcomes(local) == {f"m{n}": Outcome.SUCCEEDED for n in range(10)}
    assert dynamodb_requests.calls == {"GetItem": 1}  # the type's mark, once for a batch of 10: 0.1 per job
    group.push([JobSpecification("plain", {"script": {}}, id=f"p{n}") for n in range(10)])
    dynamodb_requests.reset()
    local.drain()
    assert dynamodb_requests.total == 0


def jobkit(local: LocalStack, jobs_toml: Path, *args: str, stdin: str | None = None) -> Any:
    config = CliConfig(config_path=jobs_toml, clock=local.clock)
    return CliRunner().invoke(main, list(args), obj=config, input=stdin)


def test_the_cli_cancels_one_job_or_all_before_a_time(local: LocalStack, jobs_toml: Path) -> None:
    group = local.queue_group("wiki")
    group.push([JobSpecification("mail", {"script": {}}, id=f"m{n}") for n in range(3)])
    # One job, after the confirmation
    result = jobkit(local, jobs_toml, "cancel", "mail", "m0", "--domain", "wiki", stdin="y\n")
    assert result.exit_code == 0, result.output
    assert "Cancel mail m0 in domain 'wiki'?" in result.output
    assert "cancelled mail m0 in domain 'wiki': it will not run" in result.output
    # Declined: nothing is cancelled
    result = jobkit(local, jobs_toml, "cancel", "mail", "m1", "--domain", "wiki", stdin="n\n")
    assert result.exit_code == 1
    local.drain()
    assert outcomes(local) == {"m0": Outcome.CANCELLED, "m1": Outcome.SUCCEEDED, "m2": Outcome.SUCCEEDED}
    reason = next(r.reason for r in local.results.results if r.job_id == "m0")
    assert reason is not None and reason.startswith("cancelled by operator ")
    # Every job pushed before a time, as JSON
    group.push(JobSpecification("mail", {"script": {}}, id="old"))
    local.clock.advance(5)
    cut = local.clock.now()
    local.clock.advance(5)
    group.push(JobSpecification("mail", {"script": {}}, id="new"))
    args = ["cancel", "mail", "--all", "--before", str(cut), "--domain", "wiki", "--yes", "--json"]
    result = jobkit(local, jobs_toml, *args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pushed_before"] == cut
    local.drain()
    ended = outcomes(local)
    assert (ended["old"], ended["new"]) == (Outcome.CANCELLED, Outcome.SUCCEEDED)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["cancel", "plain", "p", "--yes"], "plain: its jobs cannot be cancelled: declare cancellable = true"),
        (["cancel", "nope", "p", "--yes"], "nope"),
        (["cancel", "mail", "--yes"], "give a job ID, or --all (not both)"),
        (["cancel", "mail", "x", "--all", "--yes"], "give a job ID, or --all (not both)"),
        (["cancel", "mail", "x", "--before", "1", "--yes"], "--before goes with --all"),
        (["cancel", "mail", "--all", "--before", "yesterday", "--yes"], "give epoch seconds or an ISO 8601 time"),
    ],
)
def test_the_cli_refuses_what_it_cannot_do_in_one_line(
    local: LocalStack, jobs_toml: Path, args: list[str], error: str
) -> None:
    result = jobkit(local, jobs_toml, *args, "--json")
    assert result.exit_code in (1, 2)
    assert error in json.loads(result.stderr)["error"]
    assert local.dynamodb.scan(TableName=local.declaration.table_name)["Items"] == []


def test_a_runner_only_reads_cancellations_and_its_policy_allows_exactly_that(local: LocalStack) -> None:
    from jobkit.local.cloudformation import translate
    from jobkit.template import build, logical_id

    group = local.queue_group("wiki")
    group.push([JobSpecification("report", {"script": {"steps": 3}}, id=f"r{n}") for n in range(3)])
    group.cancel("report", "r0")
    group.cancel_all("mail", by="ops")
    touched: list[tuple[str, str]] = []

    def remember(params: dict[str, Any], model: Any, **_: Any) -> None:
        item = params.get("Key") or params.get("Item") or {}
        value = item.get("pk") or params.get("ExpressionAttributeValues", {}).get(":pk")
        touched.append((model.name, value["S"]))

    local.dynamodb.meta.events.register("provide-client-params.dynamodb.*", remember)
    local.clock.advance(1)
    group.push(JobSpecification("report", {"script": {"steps": 3}}, id="later"))  # runs: its check reads
    touched.clear()
    local.drain()
    cancel_requests = {(op, pk) for op, pk in touched if "#cancel#" in pk}
    # the type's mark (report has no watermark: mail's is another type's); and the own record of each job pushed before
    # the newest cancellation (r0..r2), not of the one pushed after it
    reads = {("GetItem", f"report#cancel#r{n}") for n in range(3)}
    assert cancel_requests == {("GetItem", "report#cancel#*"), *reads}
    # and the runner's policy allows those reads, and no write of a cancellation
    template = translate(build(local.declaration), parameters={"Prefix": "cancel"})
    role = template["Resources"][f"{logical_id('report')}RunnerRole"]
    statements = {s["Sid"]: s for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]}
    read = statements["ReadOwnCancellations"]
    own = statements["UseOwnTypesRecords"]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    for op, pk in cancel_requests:
        assert f"dynamodb:{op}" in read["Action"]
        assert any(string_like(p, pk) for p in read["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
        assert not any(string_like(p, pk) for p in own), (pk, own)


# -- found by review -----------------------------------------------------------------------------


def _dead(local: LocalStack, job_id: str, **spec: Any) -> JobSpecification:
    """A mail job pushed and dead-lettered (its script fails both attempts)."""
    job = JobSpecification("mail", {"script": {"fail": 2}}, id=job_id, **spec)
    local.queue_group("wiki").push(job)
    local.drain()
    return job


def test_a_lift_is_for_the_push_redriven_and_a_later_cancel_all_cancels_it_again(
    local: LocalStack, jobs_toml: Path
) -> None:
    group = local.queue_group("wiki")
    _dead(local, "x")
    # the same ID pushed again, delayed, and cancelled with the dead one
    group.push(JobSpecification("mail", {"script": {}}, id="x", delay=3_600))
    group.cancel("mail", "x")
    assert jobkit(local, jobs_toml, "dlq", "redrive", "mail", "--uncancel", "--json").exit_code == 0
    local.results.clear()
    SCRIPTED.clear()
    local.drain(until=local.clock.now() + 60)
    # Then the redriven copy runs (lifted), and the delayed push, never in the DLQ, stays cancelled
    assert [(run.job_id, run.attempt) for run in SCRIPTED] == [("x", 1), ("x", 2)]
    local.drain()
    assert [r.outcome for r in local.results.results if r.outcome.is_final] == [
        Outcome.DEAD_LETTERED,
        Outcome.CANCELLED,
    ]
    # and a cancel_all recorded after the lift cancels the redriven push again
    _dead(local, "y")
    group.cancel("mail", "y")
    assert jobkit(local, jobs_toml, "dlq", "redrive", "mail", "--uncancel").exit_code == 0
    local.clock.advance(1)
    group.cancel_all("mail")
    local.results.clear()
    local.drain()
    assert outcomes(local) == {"y": Outcome.CANCELLED, "x": Outcome.CANCELLED}  # (x had died again: redriven too)


@pytest.mark.parametrize("job_type", ["report", "once"])
def test_a_redelivery_after_a_successful_run_is_not_cancelled_and_keeps_its_result(
    local: LocalStack, job_type: str
) -> None:
    from faults import FailCalls

    group = local.queue_group("wiki")
    group.push(JobSpecification(job_type, {"script": {}}, id="done"))
    lost = FailCalls(local.sqs, "sqs.DeleteMessageBatch", code="InternalError", status=500, times=1)
    local.drain(until=local.clock.now() + 1)  # ran, and its delete was lost
    lost.remaining = 0
    assert group.cancel(job_type, "done") is False  # its records say it ran
    local.clock.advance(400)  # past the visibility timeout: SQS delivers it again
    local.drain()
    assert [r.outcome for r in local.results.results] == [Outcome.SUCCEEDED, Outcome.REDELIVERED]
    assert len(SCRIPTED) == 1
    if job_type == "report":
        status = group.status("report", "done")
        assert status is not None and status.state is JobState.SUCCEEDED and status.cancelled_by == "app"


def test_a_read_that_fails_runs_only_the_job_that_needed_it(local: LocalStack) -> None:
    from faults import FailCalls

    group = local.queue_group("wiki")
    group.push([JobSpecification("mail", {"script": {}}, id=i) for i in ("own", "a", "b")])
    group.cancel("mail", "own")
    local.clock.advance(1)
    group.cancel_all("mail")
    # the own record of "own" cannot be read; the mark and the watermark can
    FailCalls(local.dynamodb, "dynamodb.GetItem", match=lambda p: p["Key"]["pk"]["S"] == "mail#cancel#own")
    local.drain()
    ended = {r.job_id: (r.outcome, r.dedup_unavailable) for r in local.results.results}
    assert ended == {
        "own": (Outcome.SUCCEEDED, True),  # fail-open, and it says so
        "a": (Outcome.CANCELLED, False),
        "b": (Outcome.CANCELLED, False),
    }


def test_watermarks_of_many_domains_cost_a_batch_one_read(local: LocalStack) -> None:
    for n in range(50):
        local.queue_group(f"tenant{n}").cancel_all("mail")
    local.clock.advance(1)
    local.queue_group("fresh").push([JobSpecification("mail", {"script": {}}) for _ in range(10)])
    dynamodb_requests = RequestCounter(local.dynamodb)
    local.drain()
    assert dynamodb_requests.calls == {"GetItem": 1}


def test_raising_job_cancelled_without_a_cancellation_is_a_failure(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    # its first step raises JobCancelled, though nothing was cancelled
    testjobs.STEP_HOOKS.append(lambda job, step: (_ for _ in ()).throw(testjobs.JobCancelled("no reason")))
    group.push(JobSpecification("mail", {"script": {"steps": 1}}, id="liar"))
    local.drain(until=local.clock.now() + 1)
    [first] = [r for r in local.results.results]
    assert first.outcome is Outcome.RETRIED and "JobCancelled" in (first.error or "")


def test_who_cancels_is_one_printable_line(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push(JobSpecification("report", {"script": {}}, id="r"))
    group.cancel("report", "r", by="mallory\n\x1b[31mred\u202e\x00  ok")
    local.drain()
    [result] = local.results.results
    assert result.reason is not None and result.reason.startswith("cancelled by mallory [31mred ok at ")


def test_a_job_is_not_debounced_by_an_owner_that_was_cancelled(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    # C is pushed first, released in 10 s; B, pushed later, owns the window of their key
    group.push(JobSpecification("digest", {"user": "u", "script": {}}, id="C", delay=10))
    local.clock.advance(1)
    group.push(JobSpecification("digest", {"user": "u", "script": {}}, id="B"))
    local.drain(until=local.clock.now() + 1)  # B registered, and waits
    group.cancel("digest", "B")
    local.drain()
    # Then B is cancelled, and C, which nobody cancelled, runs instead of being folded into B's run
    assert outcomes(local) == {"B": Outcome.CANCELLED, "C": Outcome.SUCCEEDED}
    assert [run.job_id for run in SCRIPTED] == ["C"]


# -- found by a second review ----------------------------------------------------------------------


def test_uncancel_lifts_the_push_as_the_runner_reads_it_when_sqs_saw_it_after_its_stamp(
    local: LocalStack, jobs_toml: Path
) -> None:
    # On AWS the producer stamps enqueuedAt before SQS's SentTimestamp: the runner reads the later
    _dead(local, "late", enqueued_at=local.clock.now() - 0.3)
    local.queue_group("wiki").cancel("mail", "late")
    assert jobkit(local, jobs_toml, "dlq", "redrive", "mail", "--uncancel").exit_code == 0
    SCRIPTED.clear()
    local.drain()
    assert [run.job_id for run in SCRIPTED] == ["late", "late"]  # it ran (and died again: its script)


def test_uncancel_lifts_every_push_it_redrives(local: LocalStack, jobs_toml: Path) -> None:
    group = local.queue_group("wiki")
    _dead(local, "daily")
    local.clock.advance(100)
    _dead(local, "daily")  # the same ID, pushed again, dead too
    group.cancel_all("mail")
    assert jobkit(local, jobs_toml, "dlq", "redrive", "mail", "--uncancel").exit_code == 0
    SCRIPTED.clear()
    local.results.clear()
    local.drain()
    assert len(SCRIPTED) == 4 and Outcome.CANCELLED not in {r.outcome for r in local.results.results}


def test_a_second_cancel_from_a_slow_clock_never_moves_a_cancellation_back(local: LocalStack) -> None:
    from jobkit.core.clock import VirtualClock as Clock
    from jobkit.status.control import JobControl

    group = local.queue_group("wiki")
    local.clock.advance(60)
    group.push(JobSpecification("mail", {"script": {}}, id="j"))
    assert group.cancel("mail", "j") is True
    slow = JobControl(local.declaration, local.records, Clock(local.clock.now() - 30))
    slow.cancel("mail", "j", "wiki", by="slow host")
    local.drain()
    assert outcomes(local) == {"j": Outcome.CANCELLED}


def test_a_job_whose_window_owner_cannot_be_checked_runs(local: LocalStack) -> None:
    from faults import FailCalls

    group = local.queue_group("wiki")
    group.push(JobSpecification("digest", {"user": "u", "script": {}}, id="C", delay=10))
    local.clock.advance(1)
    group.push(JobSpecification("digest", {"user": "u", "script": {}}, id="B"))
    local.drain(until=local.clock.now() + 1)
    group.cancel("digest", "B")
    # every read of the type's mark fails from now on
    FailCalls(local.dynamodb, "dynamodb.GetItem", match=lambda p: p["Key"]["pk"]["S"] == "digest#cancel#*")
    local.drain()
    assert "C" in [run.job_id for run in SCRIPTED]  # never folded into a run that may not happen


def test_a_poisoned_tracked_job_reads_dead_lettered(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    spec = JobSpecification("report", {"script": {}}, id="p").replace(domain="wiki").stamped(local.clock.now())
    url = local.queue_urls[local.declaration.queue_name("report")]
    body = spec.to_message().replace('"type":"report"', '"type":"report","params":{"script":{}}', 0)
    # a foreign producer's body whose class cannot be imported: the type is declared, its class is not there
    local.sqs.send_message(QueueUrl=url, MessageBody=body)
    import testjobs as module

    saved = module.ScriptedJob
    del module.ScriptedJob
    try:
        local.drain()
    finally:
        module.ScriptedJob = saved
    status = group.status("report", "p")
    assert status is not None and status.state is JobState.DEAD_LETTERED and status.note == "poison"


def test_wait_since_skips_an_end_written_before_a_redrive(local: LocalStack, jobs_toml: Path) -> None:
    group = local.queue_group("wiki")
    group.push(JobSpecification("report", {"script": {"fail": 2}}, id="w"))
    local.drain()
    assert group.wait("report", "w", timeout_s=0).state is JobState.DEAD_LETTERED
    local.clock.advance(1)
    redriven_at = local.clock.now()
    assert jobkit(local, jobs_toml, "dlq", "redrive", "report").exit_code == 0
    with pytest.raises(JobWaitTimeout):
        group.wait("report", "w", timeout_s=0, since=redriven_at)  # the end it reads is from before
    local.drain()
    status = group.wait("report", "w", timeout_s=0, since=redriven_at)
    assert status.state is JobState.DEAD_LETTERED and status.updated_at >= redriven_at


def test_a_resend_of_a_cancelled_pushs_body_is_cancelled_too(local: LocalStack) -> None:
    # Found by the model: a second message with the same body (a producer's retry) arrives
    # after the cancellation; SQS sees it later, but it is the same push, stamped before
    group = local.queue_group("wiki")
    spec = JobSpecification("mail", {"script": {}}, id="again")
    group.push(spec)
    local.clock.advance(1)
    group.cancel_all("mail")
    local.clock.advance(5)
    [sent] = [b for b in _bodies(local, "report")]
    local.drain()
    local.sqs.send_message(QueueUrl=local.queue_urls[local.declaration.queue_name("report")], MessageBody=sent)
    local.drain()
    assert [r.outcome for r in local.results.results] == [Outcome.CANCELLED, Outcome.CANCELLED]
    assert not SCRIPTED


def _bodies(local: LocalStack, queue: str) -> list[str]:
    url = local.queue_urls[local.declaration.queue_name(queue)]
    messages = local.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
    return [m["Body"] for m in messages]


@pytest.mark.parametrize("again", ["cancel", "cancel_all"])
@pytest.mark.parametrize("behind_s", [0, 2])  # (2 s: the push, which failed twice since, is still before it)
def test_a_cancellation_recorded_after_a_lift_wins_in_its_millisecond_or_from_a_slower_clock(
    local: LocalStack, jobs_toml: Path, behind_s: int, again: str
) -> None:
    from jobkit.core.clock import VirtualClock as Clock
    from jobkit.status.control import JobControl

    group = local.queue_group("wiki")
    local.clock.advance(60)
    _dead(local, "z")
    group.cancel("mail", "z")
    local.clock.advance(1)
    assert jobkit(local, jobs_toml, "dlq", "redrive", "mail", "--uncancel").exit_code == 0
    # The app cancels the redriven job again: in the lift's own millisecond, or from a host whose clock is behind
    app = JobControl(local.declaration, local.records, Clock(local.clock.now() - behind_s))
    if again == "cancel":
        app.cancel("mail", "z", "wiki", by="app")
    else:
        app.cancel_all("mail", "wiki", by="app")
    local.results.clear()
    SCRIPTED.clear()
    local.drain()
    assert outcomes(local) == {"z": Outcome.CANCELLED} and not SCRIPTED


def test_a_lift_from_a_slower_clock_lifts_the_cancellations_recorded_before_it(
    local: LocalStack, jobs_toml: Path
) -> None:
    from jobkit.core.clock import VirtualClock as Clock
    from jobkit.status.control import JobControl

    group = local.queue_group("wiki")
    local.clock.advance(60)
    _dead(local, "z")
    # an app whose clock runs 30 s ahead of the operator's cancels it, and all its type's jobs
    ahead = JobControl(local.declaration, local.records, Clock(local.clock.now() + 30))
    ahead.cancel("mail", "z", "wiki", by="app")
    ahead.cancel_all("mail", "wiki", by="app")
    assert group.cancel("mail", "z") is True
    assert jobkit(local, jobs_toml, "dlq", "redrive", "mail", "--uncancel").exit_code == 0
    local.results.clear()
    SCRIPTED.clear()
    local.drain()
    assert outcomes(local) == {"z": Outcome.DEAD_LETTERED} and len(SCRIPTED) == 2
