"""Priority lanes on the local stack: a job pushed to a lane is in that lane's
queue and runs there; jobs it pushes inherit the lane; hops, holds and retries
stay in it; its dead letter is in the lane's DLQ; a limit and root
supersession span the lanes."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli.__main__ import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import BatchError, JobQueueError, SpecError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.records.batches import BatchConflict

import testjobs
from conftest import START
from testjobs import BROKEN, SCRIPTED, STEP_LANES

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

[types.stage]
# chains' steps, batches' members and callbacks
class = "testjobs:StepJob"
batches = true
batch_callback = true
priorities = { high = 2 }

[types.opener]
class = "testjobs:OpenerJob"
priorities = { high = 2 }
pushes = ["stage"]

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
    for kept in (SCRIPTED, BROKEN, STEP_LANES):
        kept.clear()
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=3) as stack:
        yield stack
    for kept in (SCRIPTED, BROKEN, STEP_LANES):
        kept.clear()


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
    answer = json.loads(listed.output)
    # the shape of a queue without lanes, every lane's messages together (each with its lane), and each lane's
    assert [m["priority"] for m in answer["messages"]] == [None, "high"]
    assert (answer["dlq"], answer["approximate_total"]) == ("lanes-render-dlq", 2)
    lanes = {lane["priority"]: lane for lane in answer["lanes"]}
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
        lane_row = r'<tr class="lane" data-type="render" data-priority="(\w+)">\s*<td>[^<]*</td>\s*<td>([^<]*)</td>'
        rows = re.findall(lane_row, page)
        assert rows == [("default", "lanes-render"), ("high", "lanes-render-high"), ("low", "lanes-render-low")]
        # the type's row: its lanes together (1 dead letter, 1 queued: the low lane's)
        row = page[page.index('data-type="render">') :]
        assert '<td class="n queued">1</td>' in row[: row.index("</tr>")]
        assert '<td class="n dead bad">1</td>' in row[: row.index("</tr>")]
        assert 'data-type="plain" data-priority' not in page


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


def test_the_test_kit_reaches_each_lane(jobs_toml: Path) -> None:
    from jobkit.testing import JobkitStack

    testjobs.use_clock(VirtualClock(START))
    SCRIPTED.clear()
    with JobkitStack(load_declaration(jobs_toml), frozen=True) as kit:
        kit.stack.queue_group("wiki").push(job("render", "urgent", priority="high"))
        assert kit.queue_url("render", priority="high").endswith("/lanes-render-high")
        assert kit.queue_arn("render", dlq=True, priority="low").endswith(":lanes-render-low-dlq")
        assert kit.receive("render") == []  # nothing in the queue's own lane
        messages = kit.receive("render", priority="high")
        assert len(messages) == 1
        # delivered twice, as SQS may: the runner sees the lane it came from each time
        for _ in range(2):
            [result] = kit.deliver("render", messages, priority="high")
            assert (result.outcome, result.priority) == (Outcome.SUCCEEDED, "high")
        with pytest.raises(ValueError, match="no priority lane 'urgent'"):
            kit.queue_url("render", priority="urgent")
        kit.stack.queue_group("wiki").push(
            [job("render", "bad", priority="low", permanent=True), job("render", "bulk", priority="default")]
        )
        queued = [kit.queued("render", priority=p) for p in (None, "low", "default")]
        assert queued == [2, 1, 1]
        kit.stack.drain()  # (the kit's drain raises the dead letter's error)
        dead = []
        for lane in (None, "low", "high", "default"):
            dead.append(len(kit.dead_letters("render", priority=lane)))
            kit.advance(1)  # moto shows a message released at the frozen clock's instant from the next ms on
        assert dead == [1, 1, 0, 0]
    SCRIPTED.clear()


def test_chain_steps_and_batch_callbacks_go_to_their_lanes_and_a_jobs_stay_in_its_own(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    # an app's chain and batch: each job in the lane it names (or the queue's own)
    stage = lambda name, priority=None: JobSpecification("stage", {"name": name}, priority=priority)  # noqa: E731
    group.chain([stage("c1", "high"), [stage("c2"), stage("c3", "high")]], id="app-chain")
    with group.batch(on_complete=stage("b-done", "high"), id="app-batch") as batch:
        batch.push([stage("b1"), stage("b2", "high")])
    # a job of the high lane starts a chain and opens a batch: every job of them stays in its lane
    opens = {"chain": ["o1", "o2"], "members": ["m1"], "callback": "m-done"}
    group.push(JobSpecification("opener", opens, priority="high"))
    local.drain()
    assert STEP_LANES == {
        "c1": "high",
        "c2": None,
        "c3": "high",
        "b-done": "high",
        "b1": None,
        "b2": "high",
        "o1": "high",
        "o2": "high",
        "m1": "high",
        "m-done": "high",
    }
    # a lane the queue lacks is refused when the chain or the batch is made, not when its step comes
    with pytest.raises(SpecError, match="no priority lane 'urgent'"):
        group.chain([stage("x"), stage("y", "urgent")])
    with pytest.raises(SpecError, match="no priority lane 'urgent'"):
        group.batch(on_complete=stage("z", "urgent"))


def test_a_job_of_a_lane_sends_one_to_the_queues_own_lane_with_priority_default(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.push(job("render", "parent", priority="high", children={"type": "notify", "count": 1}))
    local.drain()
    [child] = [run for run in SCRIPTED if run.job_type == "notify"]
    assert child.priority == "high"
    # pushed from a job, with "default": the child's queue's own lane (None would take the parent's)
    parent = JobSpecification("render", {"n": 1}, priority="high", domain="wiki").stamped(local.clock.now())
    child_group = local.queue_group("wiki").for_job(parent)
    child_group.push(JobSpecification("notify", {"name": "bulk", "script": {}}, priority="default"))
    child_group.push(JobSpecification("notify", {"name": "urgent", "script": {}}))
    assert (local.queue_depth("notify"), local.queue_depth("notify-high")) == (1, 1)
    # and on a queue without lanes, "default" is its one lane
    group.push(job("plain", "p", priority="default"))
    assert local.queue_depth("plain") == 1


def test_a_bad_priority_in_a_body_is_ignored_by_the_runner_which_reads_the_queue(local: LocalStack) -> None:
    # a producer's body with a priority that is no lane's name: the job is not refused (the field only
    # routes, and a runner from before lanes would have run it); it runs in the queue it is in
    for value in ("High", "", 5, None, "urgent", {"lane": "high"}):
        body = json.loads(job("render", f"odd-{value!r}").stamped(local.clock.now()).to_message())
        local.sqs.send_message(QueueUrl=local.queue_url("render"), MessageBody=json.dumps({**body, "priority": value}))
    body = json.loads(job("render", "claims-low").stamped(local.clock.now()).to_message())
    local.sqs.send_message(QueueUrl=local.queue_url("render-high"), MessageBody=json.dumps({**body, "priority": "low"}))
    local.drain()
    assert [r.outcome for r in local.results.results] == [Outcome.SUCCEEDED] * 7
    assert sorted(ran(), key=str) == sorted([("render", None)] * 6 + [("render", "high")], key=str)
    # push refuses one: a producer's mistake is told where it can be fixed
    with pytest.raises(SpecError, match="priority must be a lane's name"):
        JobSpecification("render", priority="High")


def test_a_lane_named_like_a_queues_own_resources_is_refused(tmp_path: Path) -> None:
    from jobkit.core.errors import ConfigError
    from jobkit.declaration.config import parse_declaration
    from jobkit.template import build

    refused = r"types\.render\.priorities\.runner: a lane name must .* not be default or dlq or runner"
    with pytest.raises(ConfigError, match=refused):
        parse_declaration({"types": {"render": {"class": "a:B", "priorities": {"runner": 2}}}}, source="t")
    # a declaration made in code, past the check: the template refuses it rather than drop a resource
    declaration = parse_declaration({"types": {"render": {"class": "jobs:B", "priorities": {"high": 2}}}}, source="t")
    types = {"render": dataclasses.replace(declaration.types["render"], priorities=(("runner", 2),))}
    (tmp_path / "jobs").mkdir()
    with pytest.raises(ConfigError, match="its lanes' resources would share logical IDs with its own"):
        build(dataclasses.replace(declaration, types=types), base_dir=tmp_path)


def test_a_push_transport_from_before_lanes_still_routes_every_job_without_one() -> None:
    from jobkit import JobQueueGroup
    from jobkit.declaration.config import parse_declaration
    from jobkit.sqs.batches import SendResult

    class OldTransport:  # a transport written before lanes: queue_url takes the type alone
        def __init__(self) -> None:
            self.sent: list[str] = []

        def queue_url(self, job_type: str) -> str:
            return f"queue:{job_type}"

        def send_batch(self, batch: Any) -> Any:
            self.sent += [outgoing.queue_url for outgoing in batch]
            result: Any = SendResult()
            result.sent.extend(batch)
            return result

    declaration = parse_declaration({"types": {"render": {"class": "a:B"}}}, source="t")
    transport = OldTransport()
    JobQueueGroup(declaration=declaration, transport=transport).push(JobSpecification("render", {}))
    assert transport.sent == ["queue:render"]


def test_a_producer_policy_too_long_to_name_each_queue_names_them_by_the_stacks_prefix(tmp_path: Path) -> None:
    from jobkit.declaration.config import parse_declaration
    from jobkit.local.cloudformation import translate
    from jobkit.template import build
    from jobkit.template.policy_size import MAX_MANAGED_POLICY_CHARS, MAX_ROLE_POLICY_CHARS, policy_chars

    types = {f"renderNumber{n}": {"class": "jobs:B", "priorities": {"high": 2, "low": 2}} for n in range(30)}
    declaration = parse_declaration({"jobkit": {"prefix": "big"}, "types": types}, source="t")
    (tmp_path / "jobs").mkdir()
    template = build(declaration, base_dir=tmp_path)
    document = template["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"]
    assert policy_chars(declaration, document) <= MAX_MANAGED_POLICY_CHARS
    # 90 queues named one by one would not fit: every queue of the stack by its prefix
    [allow] = [s for s in document["Statement"] if "sqs:SendMessage" in s["Action"]]
    assert allow["Effect"] == "Allow"

    def arn(pattern: dict[str, str], name: str) -> bool:
        text = pattern["Fn::Sub"].replace("${AWS::Partition}", "aws").replace("${AWS::Region}", "us-east-1")
        text = text.replace("${AWS::AccountId}", "123456789012").replace("${Prefix}", "big")
        regex = "".join(".*" if c == "*" else re.escape(c) for c in text)
        return re.fullmatch(regex, f"arn:aws:sqs:us-east-1:123456789012:{name}") is not None

    assert all(arn(allow["Resource"], declaration.queue_name(key)) for key in declaration.lanes)
    assert not arn(allow["Resource"], "other-renderNumber1")
    # a small stack's names each queue and lane
    small = parse_declaration({"types": {"render": {"class": "jobs:B", "priorities": {"high": 2}}}}, source="t")
    statements = build(small, base_dir=tmp_path)["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"]
    [send] = [s for s in statements["Statement"] if "sqs:SendMessage" in s["Action"]]
    assert send["Resource"] == [{"Fn::GetAtt": ["RenderQueue", "Arn"]}, {"Fn::GetAtt": ["RenderHighQueue", "Arn"]}]
    # the template translates, and every runner's policy is within IAM's limit for a role
    translated = translate(template, parameters={"Prefix": "big"})
    for name, resource in translated["Resources"].items():
        if resource["Type"] == "AWS::IAM::Role" and name.endswith("RunnerRole"):
            inline = [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
            assert sum(policy_chars(declaration, p) for p in inline) <= MAX_ROLE_POLICY_CHARS


def test_a_batch_a_job_opened_is_the_same_batch_when_an_app_opens_it_again(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    # a job of the high lane opens a batch (its callback names no lane), and is done
    group.push(JobSpecification("opener", {"members": ["m1"], "callback": "done"}, priority="high", id="o"))
    local.drain()
    # an app (or a job of another lane) opens it again with the same callback: the same batch (sealed by
    # the job, so it takes no more pushes), not one "opened with other callbacks"
    with pytest.raises(BatchError, match="is sealed") as sealed:
        group.batch(on_complete=JobSpecification("stage", {"name": "done"}), id="o-batch")
    assert not isinstance(sealed.value, BatchConflict)
    record = group.batch_status("o-batch")
    assert record is not None and record.lane == "high"  # the first opener's lane stands
    assert STEP_LANES["done"] == "high"
    # a chain a job started, started again by an app with the same steps: the same chain
    group.push(JobSpecification("opener", {"chain": ["c1", "c2"]}, priority="high", id="s"))
    local.drain()
    chain = group.chain(
        [JobSpecification("stage", {"name": "c1"}), JobSpecification("stage", {"name": "c2"})], id="s-chain"
    )
    assert chain.steps == 2 and [r.lane for r in group.chain_status("s-chain")] == ["high", "high"]
    local.drain()
    assert (STEP_LANES["c1"], STEP_LANES["c2"]) == ("high", "high")
