"""Priority lanes on the local stack: a job pushed to a lane is in that lane's
queue and runs there; jobs it pushes inherit the lane; hops, holds and retries
stay in it; its dead letter is in the lane's DLQ; a limit and root
supersession span the lanes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli.__main__ import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobQueueError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig

import testjobs
from conftest import START
from testjobs import BROKEN, SCRIPTED

DECLARATION = """
[jobkit]
prefix = "lanes"

[defaults]
backoff = { base_s = 2, factor = 2.0, cap_s = 30, jitter = 0.5 }

[types.render]
class = "testjobs:ScriptedJob"
priorities = { high = 4, low = 2 }
max_attempts = 2
pushes = ["notify", "plain"]

[types.notify]
class = "testjobs:ScriptedJob"
priorities = { high = 3 }

[types.digest]
class = "testjobs:ScriptedJob"
queue = "notify"

[types.plain]
class = "testjobs:ScriptedJob"

[types.metered]
class = "testjobs:ScriptedJob"
priorities = { high = 2 }
rate_limit = { key = "domain", per_second = 1, burst = 1 }

[push_endpoint]
types = ["digest", "plain"]
"""


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture
def local(jobs_toml: Path) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    SCRIPTED.clear()
    BROKEN.clear()
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=3) as stack:
        yield stack
    SCRIPTED.clear()
    BROKEN.clear()


def jobkit(local: LocalStack, jobs_toml: Path, *args: str) -> Any:
    return CliRunner().invoke(main, list(args), obj=CliConfig(config_path=jobs_toml, clock=local.clock))


def job(job_type: str, name: str, *, priority: str | None = None, **script: Any) -> JobSpecification:
    return JobSpecification(job_type, {"name": name, "script": script}, priority=priority, domain="wiki")


def ran(job_type: str | None = None) -> list[tuple[str, str | None]]:
    return [(run.job_type, run.priority) for run in SCRIPTED if job_type is None or run.job_type == job_type]


def test_a_job_pushed_to_a_lane_waits_in_its_queue_and_runs_there(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push(
        [job("render", "urgent", priority="high"), job("render", "bulk"), job("render", "later", priority="low")]
    )
    depths = {key: local.queue_depth(key) for key in ("render", "render-high", "render-low")}
    assert depths == {"render": 1, "render-high": 1, "render-low": 1}
    local.drain()
    assert sorted(ran("render"), key=str) == sorted([("render", "high"), ("render", None), ("render", "low")], key=str)
    body = local.results.results[0]
    assert body.outcome is Outcome.SUCCEEDED


def test_a_lane_the_queue_lacks_is_refused_at_push_naming_the_lanes_it_has(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with pytest.raises(JobQueueError) as refused:
        group.push(job("render", "x", priority="urgent"))
    assert "no priority lane 'urgent' on queue 'render'" in str(refused.value)
    assert "'high', 'low'" in str(refused.value)
    with pytest.raises(JobQueueError, match="it has none: declare priorities"):
        group.push(job("plain", "x", priority="high"))
    assert all(local.queue_depth(key) == 0 for key in local.declaration.lanes)


def test_jobs_pushed_from_a_job_take_its_lane_where_their_queue_has_it(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push(job("render", "parent", priority="high", children={"type": "notify", "count": 2}))
    group.push(job("render", "other", priority="low", children={"type": "notify", "count": 1}))
    group.push(job("render", "third", priority="high", children={"type": "plain", "count": 1}))
    local.drain()
    # notify has a high lane (a child of a high parent goes there); it has no low lane, nor has plain
    # any: those children go to their queue's own lane, and nothing is refused
    assert sorted(ran("notify"), key=str) == sorted([("notify", "high")] * 2 + [("notify", None)], key=str)
    assert ran("plain") == [("plain", None)]
    assert all(r.outcome is Outcome.SUCCEEDED for r in local.results.results)


def test_a_type_sharing_the_queue_shares_its_lanes(local: LocalStack) -> None:
    # digest declares no lanes, but its queue (notify) has notify's
    assert local.declaration.queues["notify"].lane("high") is not None
    local.queue_group("wiki").push(job("digest", "d", priority="high"))
    assert local.queue_depth("notify-high") == 1
    local.drain()
    assert ran("digest") == [("digest", "high")]


def test_a_long_delay_hops_and_a_retry_waits_in_the_lane(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    release = local.clock.now() + 3600  # over SQS's 15 minutes: the runner hops it
    group.push(JobSpecification("render", {"name": "late", "script": {"fail": 1}}, release_at=release, priority="high"))
    local.drain(until=local.clock.now() + 1000)  # one hop made, the job still waiting
    assert ran() == []
    assert (local.queue_depth("render-high"), local.queue_depth("render")) == (1, 0)
    local.drain()
    assert ran() == [("render", "high"), ("render", "high")]  # failed once, retried in its lane
    assert [run.outcome for run in SCRIPTED] == ["failed", "succeeded"]


def test_a_job_that_fails_for_good_is_in_its_lanes_dlq(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push([job("render", "bad", priority="high", permanent=True), job("render", "worse", permanent=True)])
    local.drain()
    assert local.queue_depth("render-high", dlq=True) == 1
    assert local.queue_depth("render", dlq=True) == 1
    assert local.queue_depth("render-low", dlq=True) == 0
    [dead] = local.dead_letters("render-high")
    assert '"name":"bad"' in dead["Body"]


def test_dlq_commands_read_every_lanes_dlq_and_a_redrive_sends_each_back_to_its_lane(
    local: LocalStack, jobs_toml: Path
) -> None:
    group = local.queue_group("wiki")
    BROKEN.add("down")
    group.push([job("render", "urgent", priority="high", broken="down"), job("render", "bulk", broken="down")])
    local.drain()
    listed = jobkit(local, jobs_toml, "dlq", "list", "render", "--json")
    assert listed.exit_code == 0, listed.output
    lanes = {lane["priority"]: lane for lane in json.loads(listed.output)["lanes"]}
    assert set(lanes) == {None, "high", "low"}
    assert [len(lanes[p]["messages"]) for p in (None, "high", "low")] == [1, 1, 0]
    assert lanes["high"]["dlq"] == "lanes-render-high-dlq"
    one = jobkit(local, jobs_toml, "dlq", "list", "render", "--priority", "high", "--json")
    assert [m["dlq"] for m in [json.loads(one.output)]] == ["lanes-render-high-dlq"]
    unknown = jobkit(local, jobs_toml, "dlq", "list", "render", "--priority", "urgent")
    assert unknown.exit_code != 0 and "no priority lane 'urgent' (its lanes: high, low)" in unknown.output
    # fixed: each dead letter goes back to its own lane, and runs there
    BROKEN.clear()
    SCRIPTED.clear()
    local.clock.advance(1)  # moto shows a message released at the frozen clock's instant from the next ms on
    redriven = jobkit(local, jobs_toml, "dlq", "redrive", "render")
    assert redriven.exit_code == 0, redriven.output
    assert "lanes-render-high-dlq (lane high)" in redriven.output
    assert (local.queue_depth("render-high"), local.queue_depth("render")) == (1, 1)
    local.drain()
    assert sorted(ran(), key=str) == sorted([("render", "high"), ("render", None)], key=str)
    assert all(local.queue_depth(key, dlq=True) == 0 for key in local.declaration.lanes)


def test_a_rate_limit_spans_the_lanes(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push([job("metered", f"h{n}", priority="high") for n in range(3)])
    group.push([job("metered", f"d{n}") for n in range(3)])
    local.drain()
    runs = [run for run in SCRIPTED if run.job_type == "metered"]
    assert len(runs) == 6
    starts = sorted(run.started_at for run in runs)
    # one limit for the key whatever the lane: a job a second, after the burst of one
    assert all(later - earlier >= 0.99 for earlier, later in itertools.pairwise(starts))
    # and a job held back waited in its own lane
    assert sorted(run.priority or "" for run in runs) == ["", "", "", "high", "high", "high"]


def test_a_newer_root_in_the_high_lane_supersedes_stale_leaves_in_the_low_lane(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    old = new_root_job_params("render:Main_Page", local.clock.now() - 60)
    leaf_params = {k: v for k, v in old.items() if k != "rootJobIsSelf"}
    group.push([JobSpecification("render", {**leaf_params, "n": n}, priority="low") for n in range(3)])
    newer = new_root_job_params("render:Main_Page", local.clock.now())
    group.push(JobSpecification("render", {**newer, "name": "root"}, priority="high"))
    local.drain()
    outcomes = sorted(r.outcome.value for r in local.results.results)
    assert outcomes == ["succeeded", "superseded", "superseded", "superseded"]
    assert ran() == [("render", "high")]


def test_the_runner_reads_the_lane_from_the_queue_a_message_came_from(local: LocalStack) -> None:
    # A producer that writes the body by hand and sends it to the lane's URL (docs/wire-format.md):
    # the job runs in the lane, and so do the jobs it pushes
    body = job("render", "by-hand", children={"type": "notify", "count": 1}).stamped(local.clock.now()).to_message()
    local.sqs.send_message(QueueUrl=local.queue_url("render-high"), MessageBody=body)
    local.drain()
    assert sorted(ran(), key=str) == [("notify", "high"), ("render", "high")]


def test_queues_top_and_the_web_view_show_each_lane(jobs_toml: Path) -> None:
    from ui.client import Ui

    from jobkit.local.results import PUBLISH_INTERVAL_S
    from jobkit.ops.queues import queue_summaries
    from jobkit.ops.top import top_snapshot
    from jobkit.sqs import QueueDirectory
    from jobkit.ui.settings import UiSettings

    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=3, publish_metrics=True) as stack:
        group = stack.queue_group("wiki")
        group.push(job("render", "urgent", priority="high"))
        clock.advance(30)  # picked up 30 s after its push
        group.push(job("render", "stuck", priority="low", permanent=True))
        group.push([job("render", f"bulk{n}") for n in range(2)])
        stack.drain()
        group.push(job("render", "waiting", priority="low"))
        clock.advance(PUBLISH_INTERVAL_S)
        assert stack.metrics_publisher is not None
        stack.metrics_publisher.publish()
        clock.advance(1)
        directory = QueueDirectory(stack.sqs, stack.declaration, stack.queue_urls)
        now = clock.now()
        report = queue_summaries(stack.sqs, stack.client("cloudwatch"), stack.declaration, directory, now=now)
        rows = {(q.queue, q.priority): q for q in report.queues}
        assert [(q.sqs_name, q.dead_lettered, q.queued) for q in report.queues if q.queue == "render"] == [
            ("lanes-render", 0, 0),
            ("lanes-render-high", 0, 0),
            ("lanes-render-low", 1, 1),
        ]
        assert rows[("notify", "high")].sqs_name == "lanes-notify-high"
        frame = top_snapshot(stack.sqs, stack.client("cloudwatch"), stack.declaration, directory, now=now)
        render = next(line for line in frame.lines if line.job_type == "render")
        assert (render.backlog, render.dead_lettered) == (1, 1)  # summed over the lanes
        lanes = {lane.priority: lane for lane in render.lanes}
        assert list(lanes) == [None, "high", "low"]
        assert lanes["high"].pickup_p95_ms == pytest.approx(30_000)  # the lane's own pickup delay
        assert lanes[None].pickup_p95_ms is None and lanes["low"].dead_lettered == 1
        assert next(line for line in frame.lines if line.job_type == "plain").lanes == ()
        page = Ui(stack, UiSettings(), config_path=jobs_toml).get("/").text
        assert '<tr class="lane" data-type="render" data-priority="high">' in page
        assert "<td>lanes-render-low</td>" in page


def test_the_push_endpoint_routes_by_priority_as_push_does(jobs_toml: Path) -> None:
    from http_push import fresh_aws, post, signed

    from jobkit.core.clock import SystemClock
    from jobkit.local.push_route import PATH

    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    SCRIPTED.clear()
    try:
        with fresh_aws(), LocalStack(load_declaration(jobs_toml), clock=clock, seed=3, server=True) as stack:
            url = f"{stack.endpoint_url}{PATH}"

            def send(*jobs: dict[str, Any]) -> tuple[int, Any]:
                body = json.dumps({"jobs": list(jobs)}).encode()
                return post(url, body, signed(url, body))

            # digest is the only type of its queue the endpoint takes, and notify's lanes are its queue's
            status, answer = send(
                {"type": "digest", "domain": "wiki", "params": {"name": "d"}, "priority": "high"},
                {"type": "digest", "domain": "wiki", "params": {"name": "e"}, "priority": "urgent"},
                {"type": "plain", "domain": "wiki", "params": {"name": "p"}, "priority": 7},
            )
            assert status == 207, answer  # some enqueued, some refused
            [high, unknown, bad] = answer["jobs"]
            assert high["status"] == "enqueued"
            assert unknown["status"] == "refused" and "no priority lane 'urgent'" in unknown["error"], unknown
            assert bad["status"] == "refused" and "field 'priority' must be null or a priority lane" in bad["error"]
            assert stack.queue_depth("notify-high") == 1 and stack.queue_depth("notify") == 0
            stack.drain()
            assert ran() == [("digest", "high")]
    finally:
        testjobs.use_clock(SystemClock())
