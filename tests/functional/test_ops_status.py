"""Job status tracking (``track_status``) and ``jobkit job ID``, on the local stack:
progress and results as jobs report them, failures, what it costs, and
fail-open; and the status records in both backends."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from ops_cli import Cli, cli_for

from jobkit import JobSpecification
from jobkit.core.outcome import Outcome
from jobkit.local import LocalStack
from jobkit.records.store import Records
from jobkit.status.tracker import JobState, JobStatus

from conftest import START, RequestCounter
from faults import FailCalls
from testjobs import BROKEN, HOOKS


@pytest.fixture
def jobkit(stack: LocalStack) -> Cli:
    return cli_for(stack, columns=200, advance=False)


def job_json(jobkit: Cli, job_id: str) -> Any:
    return json.loads(jobkit("job", job_id, "--json").stdout)


def test_a_tracked_job_shows_its_progress_while_it_runs_and_its_result_after(stack: LocalStack, jobkit: Cli) -> None:
    # Given a tracked job that reports 30% six seconds in, 60% right after,
    # and lets the test look while it still runs
    spec = JobSpecification("tracked", {"progress": [30, 60], "result": {"pages": 3}}, domain="enwiki")
    seen: list[Any] = []
    HOOKS.extend([lambda: stack.clock.advance(6), lambda: None, lambda: seen.append(job_json(jobkit, spec.id))])
    stack.queue_group().push(spec)
    stack.drain()
    # Then, while it ran, it was running at 30%: 60% came within 5 s of the
    # last write, so it waited for the final one
    [running] = seen
    assert running["status"]["state"] == "running" and running["status"]["progress"] == 30.0
    assert running["status"]["result"] is None and running["status"]["finished_at"] is None
    # And now it has succeeded, with its result
    status = job_json(jobkit, spec.id)["status"]
    assert {k: status[k] for k in ("state", "type", "domain", "attempt", "progress", "result", "error")} == {
        "state": "succeeded",
        "type": "tracked",
        "domain": "enwiki",
        "attempt": 1,
        "progress": 100.0,
        "result": {"pages": 3},
        "error": None,
    }
    assert status["started_at"] == START and status["finished_at"] == START + 6
    text = jobkit("job", spec.id).stdout
    assert "succeeded" in text and '{"pages":3}' in text and "100%" in text


def test_a_tracked_failure_shows_its_error_and_failure_records(stack: LocalStack, jobkit: Cli) -> None:
    BROKEN.add("A")
    spec = JobSpecification("buggy", {"page": "A"})
    stack.queue_group().push(spec)
    stack.drain()
    report = job_json(jobkit, spec.id)
    assert report["status"]["state"] == "dead_lettered" and report["status"]["will_retry"] is False
    assert report["status"]["error"] == "RuntimeError: parser crashed on A"
    assert report["status"]["note"] == "attempts_exhausted" and report["status"]["final"] is True
    [failure] = report["failures"]
    assert (failure["attempt"], failure["error_class"]) == (1, "RuntimeError")
    assert "parser crashed on A" in failure["traceback"]


def test_an_untracked_job_shows_only_its_failure_records(stack: LocalStack, jobkit: Cli) -> None:
    spec = JobSpecification("flaky", {"fail_times": 1})
    stack.queue_group().push(spec)
    stack.drain()
    report = job_json(jobkit, spec.id)
    assert report["status"] is None and [f["attempt"] for f in report["failures"]] == [1]
    assert "does not track status" in jobkit("job", spec.id).stdout
    unknown = jobkit("job", "no-such-job", ok=False)
    assert unknown.exit_code == 1 and "no records of job no-such-job" in unknown.output


def test_a_job_id_used_in_several_types_and_domains_shows_each_job(stack: LocalStack, jobkit: Cli) -> None:
    # Given one job ID used by three jobs: a flaky one in two domains, and a tracked one without a domain
    group = stack.queue_group()
    group.push([JobSpecification("flaky", {"fail_times": 1}, id="shared", domain=d) for d in ("enwiki", "dewiki")])
    group.push(JobSpecification("tracked", {"result": "ok"}, id="shared"))
    stack.drain()
    # Then the ID shows all three, each with its own records
    report = job_json(jobkit, "shared")
    assert [(m["type"], m["domain"]) for m in report["matches"]] == [
        ("flaky", "dewiki"),
        ("flaky", "enwiki"),
        ("tracked", None),
    ]
    assert "status" not in report  # no single job to speak for
    assert [[f["attempt"] for f in m["failures"]] for m in report["matches"]] == [[1], [1], []]
    assert report["matches"][2]["status"]["result"] == "ok"
    assert "is used by 3 jobs" in jobkit("job", "shared").stdout
    # And --type and --domain pick one, in the single-job shape
    one = json.loads(jobkit("job", "shared", "--type", "flaky", "--domain", "dewiki", "--json").stdout)
    assert (one["type"], one["domain"], one["status"], [f["attempt"] for f in one["failures"]]) == (
        "flaky",
        "dewiki",
        None,
        [1],
    )
    assert [m["domain"] for m in one["matches"]] == ["dewiki"]
    tracked = json.loads(jobkit("job", "shared", "--no-domain", "--json").stdout)
    assert (tracked["type"], tracked["status"]["state"]) == ("tracked", "succeeded")
    missing = jobkit("job", "shared", "--type", "flaky", "--domain", "frwiki", ok=False)
    assert missing.exit_code == 1 and "no records of job shared of type flaky in domain frwiki" in missing.output
    unknown = jobkit("job", "shared", "--type", "nope", ok=False)
    assert unknown.exit_code == 1 and "unknown job type 'nope'" in unknown.output


def test_a_job_shows_its_final_attempt(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job that fails twice, then succeeds on its last attempt
    spec = JobSpecification("flaky", {"fail_times": 2}, domain="enwiki")
    stack.queue_group().push(spec)
    stack.drain()
    # Then its final attempt is shown, with its success
    report = job_json(jobkit, spec.id)
    final = report["final_attempt"]
    assert (final["attempt"], final["succeeded_at"] is not None) == (3, True)
    assert [f["attempt"] for f in report["failures"]] == [2, 1]
    assert "attempt 3 (the last allowed)" in jobkit("job", spec.id).stdout


def test_what_tracking_costs(stack: LocalStack, dynamodb_requests: RequestCounter) -> None:
    # A tracked job: one write when it starts and one when it ends ...
    stack.queue_group().push(JobSpecification("tracked", {"result": 1}))
    stack.drain()
    assert dynamodb_requests.calls == {"PutItem": 2}
    # ... and one per progress report at least 5 s after the previous write
    dynamodb_requests.reset()
    HOOKS.extend([lambda: stack.clock.advance(5), lambda: None, lambda: stack.clock.advance(5), lambda: None])
    stack.queue_group().push(JobSpecification("tracked", {"progress": [25, 50, 75]}))
    stack.drain()
    assert dynamodb_requests.calls == {"PutItem": 4}
    # An untracked job that reports progress writes nothing
    dynamodb_requests.reset()
    stack.queue_group().push(JobSpecification("noop"))
    stack.drain()
    assert dynamodb_requests.total == 0


def test_a_status_store_that_cannot_be_written_never_fails_the_job(stack: LocalStack) -> None:
    FailCalls(stack.dynamodb, "dynamodb.PutItem", code="ProvisionedThroughputExceededException")
    spec = JobSpecification("tracked", {"progress": [50], "result": "done"})
    stack.queue_group().push(spec)
    stack.drain()
    [run] = stack.results.attempts(spec.id)
    assert run.outcome is Outcome.SUCCEEDED
    assert stack.records.statuses(spec.type, spec.id) == []


# -- the backend contract -------------------------------------------------------------------------


def test_status_records_round_trip_and_are_replaced(records: Records) -> None:
    running = JobStatus("j1", "tracked", None, JobState.RUNNING, 2, 100.5, started_at=100.5, progress=12.5)
    records.put_status(running, 2**31)
    assert records.statuses("tracked", "j1") == [running]
    done = JobStatus(
        "j1", "tracked", "enwiki", JobState.FAILED, 2, 103.25, 100.5, 103.25, 12.5, '{"a":[1]}', "E: x", True, None
    )
    records.put_status(done, 2**31)
    assert records.statuses("tracked", "j1") == [running, done]  # one per domain: None, then enwiki
    records.put_status(replace(done, domain=None), 2**31)
    assert records.statuses("tracked", "j1")[0] == replace(done, domain=None)
    assert records.statuses("tracked", "j2") == []


def test_a_debounced_tracked_job_shows_it_was_skipped_and_why() -> None:
    from jobkit.core.clock import VirtualClock
    from jobkit.declaration.config import parse_declaration

    declaration = parse_declaration(
        {
            "types": {
                "edits": {
                    "class": "testjobs:NoopJob",
                    "track_status": True,
                    "debounce": {"key": "params.page", "wait_s": 5},
                }
            }
        },
        source="test",
    )
    with LocalStack(declaration, clock=VirtualClock(START)) as local:
        # Given two edits of one page pushed a second apart
        group = local.queue_group("enwiki")
        first = JobSpecification("edits", {"page": "Paris", "n": 1})
        group.push(first)
        local.clock.advance(1)  # type: ignore[attr-defined]
        later = JobSpecification("edits", {"page": "Paris", "n": 2})
        group.push(later)
        local.drain()
        # Then the first's status says it was skipped, debounced by the later one,
        # which succeeded: `jobkit job ID` finds both
        outcomes = {r.job_id: r.outcome for r in local.results.results if r.outcome.is_final}
        assert outcomes == {first.id: Outcome.DEBOUNCED, later.id: Outcome.SUCCEEDED}
        [skipped] = local.records.statuses("edits", first.id)
        assert skipped.state is JobState.SKIPPED and skipped.note is not None
        assert skipped.note.startswith("debounced: job ") and later.id in skipped.note
        [ran] = local.records.statuses("edits", later.id)
        assert ran.state is JobState.SUCCEEDED
