"""Chains on the local stack: steps run one after another, each a batch, a
step's result passed to the next, a failed step stopping the chain until it is
redriven, and faults mid-step pushing the next step once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.batches.chains import step_job_id
from jobkit.cli.__main__ import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import BatchError, UnknownJobType
from jobkit.declaration.config import load_declaration
from jobkit.declaration.params_schema import InvalidParams
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig

import testjobs
from conftest import START
from testjobs import BROKEN, LEAVES_RAN, SCRIPTED, STEPS, SimulatedCrash

DECLARATION = """
[jobkit]
prefix = "chains"

[defaults]
timeout_s = 60
backoff = { base_s = 2, factor = 2.0, cap_s = 30, jitter = 0.5 }

[types.render]
class = "testjobs:StepJob"
batches = true
track_status = true
max_attempts = 2

[types.purge]
class = "testjobs:StepJob"
batches = true
batch_callback = true
track_status = true
max_attempts = 2

[types.announce]
class = "testjobs:StepJob"
queue = "purge"
batches = true
batch_callback = true
params_schema = { required = ["name"] }

[types.partition]
class = "testjobs:PartitionJob"
batches = true

[types.loose]
class = "testjobs:StepJob"
queue = "render"
"""


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    for kept in (SCRIPTED, STEPS, BROKEN, LEAVES_RAN):
        kept.clear()
    yield
    for kept in (SCRIPTED, STEPS, BROKEN, LEAVES_RAN):
        kept.clear()


@pytest.fixture
def local(jobs_toml: Path) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=5) as stack:
        yield stack


def step(job_type: str, name: str, **params: Any) -> JobSpecification:
    return JobSpecification(job_type, {"name": name, "script": params.pop("script", {}), **params})


def jobkit(local: LocalStack, jobs_toml: Path, *args: str) -> Any:
    return CliRunner().invoke(main, list(args), obj=CliConfig(config_path=jobs_toml, clock=local.clock))


def test_a_chain_runs_its_steps_in_order_and_each_gets_what_the_step_before_left(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    chain = group.chain(
        [
            step("render", "render", result={"pages": 3}),
            [step("purge", f"purge-{n}") for n in range(3)],
            step("announce", "announce"),
        ],
        id="edit-5",
        description="edit 5",
    )
    assert (chain.id, chain.steps, chain.batch_id(2)) == ("edit-5", 3, "edit-5-2")
    local.drain()
    assert STEPS[0][1] == "render"
    assert sorted(name for _, name, _ in STEPS[1:4]) == ["purge-0", "purge-1", "purge-2"]
    assert STEPS[4][1] == "announce" and len(STEPS) == 5
    # the one job of step 1 passed its result; the batch of step 2 its summary
    assert [previous for _, _, previous in STEPS[1:4]] == [{"pages": 3}] * 3
    assert STEPS[4][2] == {
        "id": "edit-5-2",
        "total": 3,
        "pending": 0,
        "succeeded": 3,
        "skipped": 0,
        "dead_lettered": 0,
        "cancelled": 0,
    }
    records = group.chain_status("edit-5")
    assert [r.ref.batch_id for r in records] == ["edit-5-1", "edit-5-2", "edit-5-3"]
    assert all(r.complete and r.counts.failures == 0 for r in records)
    assert [r.description for r in records] == ["edit 5"] * 3
    # each step's jobs have IDs derived from the chain
    ran = {(run.job_type, run.job_id) for run in SCRIPTED}
    assert ("announce", step_job_id("wiki", "edit-5", 3, 0)) in ran


def test_a_dead_lettered_step_stops_the_chain_and_redriving_it_fixed_continues_it_once(
    local: LocalStack, jobs_toml: Path
) -> None:
    group = local.queue_group("wiki")
    BROKEN.add("bad")
    group.chain(
        [
            step("render", "render"),
            [step("purge", "ok"), step("purge", "bad", script={"broken": "bad"})],
            step("announce", "announce"),
        ],
        id="c",
    )
    local.drain()
    assert sorted(name for _, name, _ in STEPS) == ["ok", "render"]
    records = group.chain_status("c")
    assert [r.ref.batch_id for r in records] == ["c-1", "c-2"]
    assert records[1].counts.failures == 1 and records[1].fired == {}
    # The operator fixes the cause and redrives: the chain goes on, once
    BROKEN.clear()
    assert jobkit(local, jobs_toml, "dlq", "redrive", "purge").exit_code == 0
    local.drain()
    assert sorted(name for _, name, _ in STEPS) == ["announce", "bad", "ok", "render"]
    assert len(group.chain_status("c")) == 3
    # a second redrive of nothing changes nothing
    assert jobkit(local, jobs_toml, "dlq", "redrive", "purge").exit_code == 0
    local.drain()
    assert [name for _, name, _ in STEPS].count("announce") == 1


def test_a_fan_out_step_is_done_after_its_last_leaf_and_the_next_step_fans_in(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.chain([JobSpecification("partition", {"start": 0, "end": 400, "step": 40}), step("announce", "done")])
    local.drain()
    assert sorted(p for p, _ in LEAVES_RAN) == list(range(400))
    assert [name for _, name, _ in STEPS] == ["done"]
    summary = STEPS[0][2]
    assert (summary["total"], summary["succeeded"], summary["pending"]) == (410, 410, 0)  # the leaves and 10 steps
    order = [r.job_type for r in local.results.results if r.outcome.is_final]
    assert order.index("announce") > max(i for i, t in enumerate(order) if t == "partition")


def test_a_step_whose_next_cannot_be_pushed_pushes_it_later_once(local: LocalStack) -> None:
    from faults import FailCalls

    group = local.queue_group("wiki")
    group.chain([step("render", "render", result=7), step("announce", "announce")], id="late")
    purge_queue = local.queue_url("purge")
    down = FailCalls(
        local.sqs,
        "sqs.SendMessageBatch",
        code="InternalError",
        status=500,
        match=lambda p: p["QueueUrl"] == purge_queue,
    )
    local.drain(until=local.clock.now() + 1)
    assert down.failed_calls > 0 and [name for _, name, _ in STEPS] == ["render"]
    down.remove()
    local.drain()
    assert STEPS == [("render", "render", None), ("render", "render", None), ("announce", "announce", 7)]
    # render's message went back to push the next step again; not deliver_once, it ran again, as after
    # a crash, and the next step, pushed once, ran once
    assert [run.job_type for run in SCRIPTED].count("render") == 2


def test_a_next_step_pushed_again_after_a_fault_runs_once(local: LocalStack) -> None:
    # Given a runner that pushed the next step, then died before it sealed that step's batch:
    # the step is pushed again, with the same IDs, and its batch_callback type runs it once
    from jobkit.batches.control import BatchKeeper

    group = local.queue_group("wiki")
    seal = BatchKeeper.seal
    died: list[str] = []

    def dies_once(keeper: BatchKeeper, ref: Any) -> Any:
        if ref.batch_id == "k-2" and not died:
            died.append(ref.batch_id)
            raise SimulatedCrash("k-2", 1, "render", "wiki")
        return seal(keeper, ref)

    BatchKeeper.seal = dies_once  # type: ignore[method-assign]
    try:
        group.chain([step("render", "render"), [step("purge", "a"), step("purge", "b")], step("announce", "z")], id="k")
        with pytest.raises(SimulatedCrash):
            local.drain()
        local.clock.advance(61)  # the invocation died: its messages come back after their visibility timeout
        local.drain()
    finally:
        BatchKeeper.seal = seal  # type: ignore[method-assign]
    assert died == ["k-2"]
    # render's invocation died after it ran: it runs again, as after any crash; the next step's jobs,
    # pushed twice, ran once each
    names = sorted(name for _, name, _ in STEPS)
    assert names == ["a", "b", "render", "render", "z"], names
    sent = [r for r in local.results.results if r.job_type == "purge"]
    assert len(sent) > 2, "the step was pushed again"
    record = group.chain_status("k")[1]
    assert (record.counts.added, record.counts.ends["succeeded"]) == (2, 2)


def test_a_chain_started_again_with_its_id_pushes_nothing_new(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    steps = [step("render", "r"), step("announce", "a")]
    group.chain(steps, id="again")
    group.chain(steps, id="again")
    local.drain()
    group.chain(steps, id="again")
    local.drain()
    assert sorted(name for _, name, _ in STEPS) == ["a", "r"]
    with pytest.raises(BatchError, match="other callbacks"):
        group.chain([step("render", "r"), step("announce", "other")], id="again")


def test_what_a_chain_cannot_take_is_refused_before_anything_is_pushed(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    refused: list[tuple[Any, type[Exception], str]] = [
        ([], BatchError, "at least one step"),
        ([[]], BatchError, "non-empty list"),
        ([step("loose", "x")], BatchError, "batches = true"),
        ([step("render", "x"), step("render", "y")], BatchError, "batch_callback = true"),
        ([JobSpecification("render", {}, id="mine")], BatchError, "derived from the chain"),
        ([JobSpecification("render", {}, delay=5)], BatchError, "no id, delay"),
        ([JobSpecification("render", {}, domain="other")], BatchError, "its domain"),
        ([step("render", "x"), JobSpecification("announce", {})], InvalidParams, "name"),
        ([JobSpecification("nope", {})], UnknownJobType, "nope"),
        (["render"], BatchError, "JobSpecification"),
        ([step("render", "x"), step("announce", "y", blob="x" * 160_000)], BatchError, "150,000"),
    ]
    for steps, error, words in refused:
        with pytest.raises(error, match=words):
            group.chain(steps)
    with pytest.raises(BatchError, match="chain ID"):
        group.chain([step("render", "x")], id="x" * 80)
    local.drain()
    assert SCRIPTED == [] and STEPS == []


def test_a_step_job_body_carries_its_chain_beside_its_batch(local: LocalStack) -> None:
    from jobkit.core.chain_link import ChainLink
    from jobkit.core.errors import SpecError

    body = JobSpecification("announce", {"name": "a"}, id="x", batch="w-2", chain=ChainLink("w", 2, [1, 2])).stamped(
        1.0
    )
    again = JobSpecification.from_message(body.to_message())
    assert again.chain == ChainLink("w", 2, [1, 2]) and again.to_message() == body.to_message()
    assert '"chain":{"id":"w","step":2,"previousResult":[1,2]}' in body.to_message()
    for bad, words in (
        (body.to_message().replace('"batch":{"id":"w-2"},', "").replace('"v":2', '"v":1'), "needs 'batch'"),
        (body.to_message().replace('"step":2', '"step":0'), "'step' from 1"),
        (body.to_message().replace('"step":2', '"step":true'), "'step' from 1"),
        (body.to_message().replace('"id":"w"', '"id":"w w"'), "'chain' must be an object"),
    ):
        with pytest.raises(SpecError, match=words):
            JobSpecification.from_message(bad)


def test_jobkit_batch_names_a_step_s_next_step_and_starting_the_chain_again_pushes_one_left_due(
    local: LocalStack, jobs_toml: Path
) -> None:
    import json

    from jobkit.records.batches import BatchRef

    group = local.queue_group("wiki")
    steps = [step("render", "r"), step("announce", "a")]
    group.chain(steps, id="shown")
    result = jobkit(local, jobs_toml, "batch", "shown-1", "--domain", "wiki")
    assert "on_success (the next step of chain shown, batch shown-2): not yet" in result.output, result.output
    # the step ends, and the claim of its next step is taken by a pusher that dies (never released)
    records = local.records.batches
    ref = BatchRef("shown-1", "wiki")
    assert records.claim(ref, "on_success", "dead", local.clock.now(), local.clock.now() + 1)
    local.drain()
    assert [name for _, name, _ in STEPS] == ["r"]
    report = json.loads(jobkit(local, jobs_toml, "batch", "shown-1", "--domain", "wiki", "--json").stdout)
    assert report["callbacks"]["on_success"]["next_step"] == {"chain": "shown", "step": 2, "batch": "shown-2"}
    assert report["callbacks"]["on_success"]["pushed_at"] is None
    local.clock.advance(2)  # its claim expired; the app starts the chain again
    group.chain(steps, id="shown")
    local.drain()
    assert [name for _, name, _ in STEPS] == ["r", "a"]


def test_a_step_pushed_in_part_is_pushed_again_with_the_same_ids_and_each_job_runs_once(local: LocalStack) -> None:
    import json

    from faults import FailBatchEntries

    def second(entry: dict[str, Any]) -> bool:
        return json.loads(entry["MessageBody"])["params"].get("name") == "b"

    fault = FailBatchEntries(local.sqs, second, only_matching=True, times=6)  # past push's own retries
    group = local.queue_group("wiki")
    group.chain([step("render", "r"), [step("purge", "a"), step("purge", "b")], step("announce", "z")], id="part")
    local.drain()
    fault.remove()
    assert fault.failed_entries == 6
    assert sorted(name for _, name, _ in STEPS) == ["a", "b", "r", "z"]
    record = group.chain_status("part")[1]
    assert (record.counts.added, record.counts.ends["succeeded"]) == (2, 2)


# -- found by review -----------------------------------------------------------------------------


def test_a_next_step_whose_batch_id_is_taken_stops_the_chain_with_an_error_and_touches_no_other_batch(
    local: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    from jobkit.records.batches import BatchConflict

    group = local.queue_group("wiki")
    with group.batch(id="x-2") as sealed:  # a batch of the app's own, with the ID the chain's step 2 would have
        sealed.push(step("purge", "users"))
    mine = group.batch(id="y-2", description="the app's own")  # open
    mine.push(step("purge", "mine"))
    group.batch(id="e-2", on_complete=JobSpecification("announce", {"name": "other"}))  # open, other callbacks
    for chain_id in ("x", "y", "e"):
        group.chain([step("render", f"r-{chain_id}"), step("announce", f"a-{chain_id}")], id=chain_id)
    local.drain()
    # each chain stopped at its first step, said why, and ran its first step once
    assert sorted(name for _, name, _ in STEPS) == ["mine", "r-e", "r-x", "r-y", "users"]
    errors = [
        r.getMessage() for r in caplog.records if r.levelname == "ERROR" and "chain cannot go on" in r.getMessage()
    ]
    assert len(errors) == 3 and all("other callbacks" in e for e in errors), errors
    # the app's batches are as the app left them: the open one still open, with its one member
    record = group.batch_status("y-2")
    assert record is not None and record.sealed_at is None and record.counts.added == 1
    assert mine.push(step("purge", "more"))  # still takes the app's pushes
    assert group.batch_status("x-2").counts.added == 1  # type: ignore[union-attr]
    # its step is not marked pushed; starting the chain again says what is in the way
    assert "on_success" not in group.chain_status("x")[0].fired
    with pytest.raises(BatchConflict, match="other callbacks"):
        group.chain([step("render", "r-x"), step("announce", "a-x")], id="x")
    local.drain()


def test_a_chain_started_again_with_another_first_step_or_one_step_chain_is_refused(local: LocalStack) -> None:
    from jobkit.records.batches import BatchConflict

    group = local.queue_group("wiki")
    group.chain([step("render", "first"), step("announce", "a")], id="c")
    with pytest.raises(BatchConflict):
        group.chain([step("render", "DIFFERENT"), step("announce", "a")], id="c")
    group.chain([step("render", "one")], id="d")
    with pytest.raises(BatchConflict):
        group.chain([[step("render", "p1"), step("render", "p2")]], id="d")
    local.drain()
    assert sorted(name for _, name, _ in STEPS) == ["a", "first", "one"]
    # the last step's batch says it is the chain's end
    [only] = group.chain_status("d")
    assert only.on_success is not None and "on_success" in only.fired


def test_two_starts_of_a_chain_at_once_both_return_and_push_its_first_step_once(local: LocalStack) -> None:
    # the second start opened the step before the first sealed it, and pushes after: the batch refuses
    # its push (sealed), which is the first start's doing, not an error
    from jobkit.batches.control import BatchKeeper

    group = local.queue_group("wiki")
    steps = [step("render", "r"), step("announce", "a")]
    group.chain(steps, id="twice")
    open_step = BatchKeeper.open_step
    BatchKeeper.open_step = lambda keeper, ref, rest, description, lane=None: (  # type: ignore[method-assign]
        open_step(keeper, ref, rest, description, lane),
        None,
    )[1]
    try:
        assert group.chain(steps, id="twice").id == "twice"
    finally:
        BatchKeeper.open_step = open_step  # type: ignore[method-assign]
    local.drain()
    assert sorted(name for _, name, _ in STEPS) == ["a", "r"]
