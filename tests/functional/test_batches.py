"""Batches on the local stack's queues, table and runners: members counted in
at push and out as they end, the jobs members push joining their batch, the
callbacks pushed once, and the errors at push."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli.__main__ import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import BatchError, JobQueueError
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.records.batches import BatchRef, Member, shard_of

import testjobs
from conftest import START
from testjobs import BROKEN, CALLBACKS, LEAVES_RAN, SCRIPTED

DECLARATION = """
[jobkit]
prefix = "batches"

[defaults]
timeout_s = 60
backoff = { base_s = 2, factor = 2.0, cap_s = 30, jitter = 0.5 }

[types.page]
class = "testjobs:ScriptedJob"
batches = true
max_attempts = 2

[types.once]
class = "testjobs:ScriptedJob"
queue = "page"
batches = true
deliver_once = true

[types.loose]
class = "testjobs:ScriptedJob"
queue = "page"

[types.partition]
class = "testjobs:PartitionJob"
batches = true

[types.reached]
class = "testjobs:CallbackJob"
batch_callback = true
params_schema = { required = ["batch"] }

[types.ghost]
# its class was renamed in a deploy after its jobs were pushed
class = "testjobs:NoSuchJob"
queue = "page"
batches = true

[types.opener]
# opens batches of pages from a job
class = "testjobs:ScriptedJob"
pushes = ["page"]

[types.other]
class = "testjobs:CallbackJob"
queue = "reached"

[types.big]
# its params go to the payload bucket
class = "testjobs:ScriptedJob"
batches = true
offload_above_kb = 1

[types.settled]
class = "testjobs:ScriptedJob"
batches = true
track_status = true
debounce = { key = "params.page", wait_s = 30, max_wait_s = 300 }
"""


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    for kept in (SCRIPTED, CALLBACKS, BROKEN, LEAVES_RAN):
        kept.clear()
    yield
    for kept in (SCRIPTED, CALLBACKS, BROKEN, LEAVES_RAN):
        kept.clear()


@pytest.fixture
def local(jobs_toml: Path) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=3) as stack:
        yield stack


#: The leaves of the recursive fan-out (the env knob makes a profile quicker).
LEAVES = int(__import__("os").environ.get("BATCH_LEAVES", "10000"))


def page(n: int, **script: Any) -> JobSpecification:
    return JobSpecification("page", {"n": n, "script": script})


def summaries(callback: str) -> list[dict[str, Any]]:
    return [params["batch"] for _, _, params in CALLBACKS if params["batch"]["callback"] == callback]


def jobkit(local: LocalStack, jobs_toml: Path, *args: str) -> Any:
    return CliRunner().invoke(main, list(args), obj=CliConfig(config_path=jobs_toml, clock=local.clock))


def callbacks_down(local: LocalStack) -> Any:
    """The callbacks' queue refuses every push until ``.remove()``."""
    from faults import FailCalls

    reached_queue = local.queue_url("reached")
    return FailCalls(
        local.sqs,
        "sqs.SendMessageBatch",
        code="InternalError",
        status=500,
        match=lambda p: p["QueueUrl"] == reached_queue,
    )


def test_a_batch_with_a_failure_completes_once_and_succeeds_once_its_failure_is_redriven_and_fixed(
    local: LocalStack, jobs_toml: Path
) -> None:
    group = local.queue_group("wiki")
    BROKEN.add("bad")
    done, ok = JobSpecification("reached", {"edit": 5}), JobSpecification("reached", {"edit": 5, "ok": True})
    with group.batch(on_complete=done, on_success=ok, description="edit 5") as batch:
        batch.push([page(n) for n in range(99)] + [page(99, broken="bad")])
    local.drain()
    # on_complete once, with the counts; no on_success: a member was dead-lettered
    assert summaries("on_complete") == [
        {
            "id": batch.id,
            "callback": "on_complete",
            "description": "edit 5",
            "total": 100,
            "pending": 0,
            "succeeded": 99,
            "skipped": 0,
            "dead_lettered": 1,
            "cancelled": 0,
        }
    ]
    assert CALLBACKS[0][2]["edit"] == 5 and summaries("on_success") == []
    status = group.batch_status(batch.id)
    assert status is not None and status.complete and set(status.fired) == {"on_complete"}
    # The operator fixes the cause and redrives: the member succeeds, and on_success is pushed once
    BROKEN.clear()
    assert jobkit(local, jobs_toml, "dlq", "redrive", "page").exit_code == 0
    local.drain()
    assert [s["succeeded"] for s in summaries("on_success")] == [100]
    assert len(summaries("on_complete")) == 1
    status = group.batch_status(batch.id)
    assert status is not None and status.counts.failures == 0 and set(status.fired) == {"on_complete", "on_success"}


def test_a_debounced_member_pushed_twice_ends_once_when_it_runs_not_when_its_first_copy_is_debounced(
    local: LocalStack,
) -> None:
    group = local.queue_group("wiki")
    spec = JobSpecification("settled", {"page": "Main Page", "script": {}}, id="settle-1")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push([spec])
        local.clock.advance(1)
        batch.push([spec])  # the same job again (a retried request): the later push owns the window's run
    local.drain()
    outcomes = [r.outcome for r in local.results.results if r.job_type == "settled"]
    assert Outcome.DEBOUNCED in outcomes and outcomes[-1] is Outcome.SUCCEEDED
    [summary] = summaries("on_complete")
    assert (summary["total"], summary["succeeded"], summary["skipped"]) == (1, 1, 0)
    status = group.status("settled", spec.id)
    assert status is not None and status.state == "succeeded"


def test_the_jobs_a_member_pushes_join_its_batch_and_it_ends_after_the_last(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push(
            [JobSpecification("page", {"script": {"children": {"type": "page", "count": 3}}, "childScript": {}})]
        )
    local.drain()
    assert len(SCRIPTED) == 4
    assert [(s["total"], s["succeeded"]) for s in summaries("on_complete")] == [(4, 4)]


def test_a_recursive_fan_out_of_10_000_leaves_is_one_batch_that_ends_once_after_its_last_leaf(
    local: LocalStack,
) -> None:
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push(JobSpecification("partition", {"start": 0, "end": LEAVES, "step": 40}))
    local.drain()
    assert sorted(page for page, _ in LEAVES_RAN) == list(range(LEAVES))
    # 10,000 leaves and 250 partition steps (the first pushed by the app, each next by the one before)
    steps = LEAVES // 40
    assert [(s["total"], s["succeeded"], s["pending"]) for s in summaries("on_complete")] == [
        (LEAVES + steps,) * 2 + (0,)
    ]
    order = [r.job_type for r in local.results.results if r.outcome.is_final]
    assert order.index("reached") > max(i for i, t in enumerate(order) if t == "partition")


def test_a_member_counts_once_however_often_it_is_pushed_delivered_or_retried(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    batch = group.batch(on_complete=JobSpecification("reached", {}))
    first = page(0, fail=1)
    batch.push([first, JobSpecification("once", {"script": {}}, id="o")])
    batch.push(JobSpecification("once", {"script": {}}, id="o"))  # the same job again, in the same SQS batch
    local.drain()
    # and each again once they ended: a deliver_once copy is acknowledged, a plain one runs again
    batch.push([JobSpecification("once", {"script": {}}, id="o"), first])
    local.drain()
    batch.seal()
    local.drain()
    assert [(s["total"], s["succeeded"], s["pending"]) for s in summaries("on_complete")] == [(2, 2, 0)]
    assert len(CALLBACKS) == 1


def test_a_batch_whose_members_ended_before_the_seal_is_ended_by_the_seal(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    batch = group.batch(on_complete=JobSpecification("reached", {}), on_success=JobSpecification("reached", {}))
    batch.push([page(0), page(1)])
    local.drain()
    assert CALLBACKS == []  # not sealed: more may come
    record = batch.seal()
    assert set(record.fired) == {"on_complete", "on_success"}
    batch.seal()  # again: nothing more
    local.drain()
    assert sorted(s["callback"] for s in summaries("on_complete") + summaries("on_success")) == [
        "on_complete",
        "on_success",
    ]


def test_an_empty_batch_ends_when_sealed(local: LocalStack) -> None:
    with local.queue_group("wiki").batch(on_complete=JobSpecification("reached", {})):
        pass
    local.drain()
    assert [(s["total"], s["pending"]) for s in summaries("on_complete")] == [(0, 0)]


def test_a_batch_pushed_to_from_two_requests_is_one_batch(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    first = group.batch(on_complete=JobSpecification("reached", {}), id="edit-7")
    first.push(page(0))
    again = group.batch(on_complete=JobSpecification("reached", {}), id="edit-7")
    again.push(page(1))
    again.seal()
    local.drain()
    assert [s["total"] for s in summaries("on_complete")] == [2]


def test_what_a_batch_cannot_take_is_refused_at_push_and_sends_nothing(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with pytest.raises(BatchError, match=r"declare batch_callback = true in \[types.other\]"):
        group.batch(on_complete=JobSpecification("other", {}))
    batch = group.batch(on_complete=JobSpecification("reached", {}), id="b1")
    with pytest.raises(BatchError, match=r"declare batches = true in \[types.loose\]"):
        batch.push([page(0), JobSpecification("loose", {"script": {}})])
    with pytest.raises(BatchError, match="opened with other callbacks"):
        group.batch(on_complete=JobSpecification("reached", {"other": 1}), id="b1")
    with pytest.raises(BatchError, match="of batch 'x'"):
        batch.push(page(0).replace(batch="x"))
    with pytest.raises(BatchError, match="summary"):
        group.batch(on_complete=JobSpecification("reached", {"batch": 1}))
    with pytest.raises(BatchError, match="must match"):
        group.batch(id="no spaces")
    batch.seal()
    with pytest.raises(BatchError, match="sealed"):
        batch.push(page(1))
    with pytest.raises(BatchError, match="sealed"):
        group.batch(on_complete=JobSpecification("reached", {}), id="b1")
    assert local.drain() == 1  # only the empty batch's callback ran: no member was sent
    assert [s["total"] for s in summaries("on_complete")] == [0]


def test_a_member_body_is_wire_version_2_and_a_plain_job_stays_version_1(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    group.batch(id="b2").push(page(0))
    group.push(page(1))
    received = local.sqs.receive_message(QueueUrl=local.queue_url("page"), MaxNumberOfMessages=10)
    bodies = [json.loads(m["Body"]) for m in received["Messages"]]
    assert sorted((b["v"], b.get("batch")) for b in bodies) == [(1, None), (2, {"id": "b2"})]


def test_outcomes_other_than_success_end_members_too(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push([JobSpecification("once", {"script": {}}, id="same"), page(1, permanent=True)])
    local.drain()
    assert [(s["succeeded"], s["dead_lettered"]) for s in summaries("on_complete")] == [(1, 1)]
    assert {r.outcome for r in local.results.results} >= {Outcome.SUCCEEDED, Outcome.DEAD_LETTERED}


def _requests(local: LocalStack) -> list[tuple[str, str]]:
    """(IAM action, partition key) of every DynamoDB request the stack's client makes from now on."""
    seen: list[tuple[str, str]] = []

    def remember(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in ("TransactWriteItems", "TransactGetItems"):
            actions = {"Update": "UpdateItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
            for item in params["TransactItems"]:
                ((kind, request),) = item.items()
                seen.append((actions[kind], request["Key"]["pk"]["S"]))
        elif model.name == "BatchGetItem":
            seen.extend(("BatchGetItem", k["pk"]["S"]) for t in params["RequestItems"].values() for k in t["Keys"])
        else:
            item = params.get("Key") or params.get("Item") or {}
            value = item.get("pk") or params.get("ExpressionAttributeValues", {}).get(":pk")
            seen.append((model.name, value["S"]))

    local.dynamodb.meta.events.register("provide-client-params.dynamodb.*", remember)
    return seen


def _allowed(statements: list[dict[str, Any]], action: str, pk: str) -> bool:
    from conftest import string_like

    return any(
        f"dynamodb:{action}" in s["Action"]
        and any(string_like(p, pk) for p in s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
        for s in statements
        if "Condition" in s
    )


def test_each_role_may_make_the_batch_requests_it_makes_and_a_member_costs_two_writes_to_end(
    local: LocalStack,
) -> None:
    from jobkit.local.cloudformation import translate
    from jobkit.template import build, logical_id

    template = translate(build(local.declaration), parameters={"Prefix": "batches"})
    resources = template["Resources"]

    def role(queue: str) -> list[dict[str, Any]]:
        policies = resources[f"{logical_id(queue)}RunnerRole"]["Properties"]["Policies"]
        return [s for p in policies for s in p["PolicyDocument"]["Statement"]]

    runner, callbacks = role("page"), role("reached")
    producer = resources["ProducerPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    seen = _requests(local)
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push([page(n) for n in range(20)])
    pushed, seen[:] = list(seen), []
    local.drain()
    assert pushed and seen and all(_allowed(producer, *request) for request in pushed), pushed
    # (the callback's own runner makes its delivery claim: its own records)
    denied = [r for r in seen if not _allowed(callbacks if r[1].startswith("reached#") else runner, *r)]
    assert not denied, denied
    # Ending 20 members (two SQS batches of 10): one transaction each, a member's item and its shard's counts
    writes = [pk for action, pk in seen if action == "UpdateItem" and "#" in pk[len("_batch#") :]]
    assert len(writes) <= 2 * 20
    # and a job outside batches touches no batch record
    seen.clear()
    group.push(page(99))
    local.drain()
    assert not [pk for _, pk in seen if pk.startswith("_batch#")]


def test_jobkit_batch_shows_the_counts_the_callbacks_and_what_it_waits_for(local: LocalStack, jobs_toml: Path) -> None:
    group = local.queue_group("wiki")
    batch = group.batch(on_complete=JobSpecification("reached", {}), description="edit 9", id="edit-9")
    batch.push([page(0), JobSpecification("page", {"script": {}}, id="p1")])
    batch.seal()
    result = jobkit(local, jobs_toml, "batch", "edit-9", "--domain", "wiki")
    assert result.exit_code == 0, result.output
    assert "batch edit-9 in domain 'wiki': edit 9" in result.output
    assert "waiting for 2 member(s)" in result.output and "page p1" in result.output
    assert "on_complete (reached): not yet" in result.output
    local.drain()
    report = json.loads(jobkit(local, jobs_toml, "batch", "edit-9", "--domain", "wiki", "--json").stdout)
    assert report["ended"] is True and report["counts"]["succeeded"] == 2 and report["pending_members"] == []
    assert report["callbacks"]["on_complete"]["pushed_at"] is not None
    # A batch of another domain is not this one: the error says where to look
    missing = jobkit(local, jobs_toml, "batch", "edit-9")
    assert missing.exit_code != 0 and "--domain" in missing.output


def test_with_the_table_down_while_members_end_their_ends_are_counted_later_and_the_batch_ends_once(
    local: LocalStack, jobs_toml: Path
) -> None:
    from faults import FailCalls

    group = local.queue_group("wiki")
    batch = group.batch(on_complete=JobSpecification("reached", {}), id="outage")
    batch.push([JobSpecification("once", {"script": {}}, id="o"), page(1), page(2, permanent=True)])
    batch.seal()
    # every count of the first SQS batch fails, all three tries
    outage = FailCalls(local.dynamodb, "dynamodb.TransactWriteItems", code="InternalServerError", status=500, times=3)
    local.drain()
    outage.remove()
    assert outage.failed_calls == 3
    ran = [(run.job_type, run.job_id) for run in SCRIPTED]
    # The deliver_once member came back and was acknowledged without running again; the plain one ran again
    assert ran.count(("once", "o")) == 1 and len([r for r in ran if r[0] == "page"]) >= 3
    # The dead-lettered member's end was not counted: the batch waits for it, and says so
    status = group.batch_status("outage")
    assert status is not None and not status.complete and status.counts.pending == 1 and CALLBACKS == []
    report = jobkit(local, jobs_toml, "batch", "outage", "--domain", "wiki")
    assert "waiting for 1 member(s)" in report.output
    # Redriven, it ends again (dead-lettered again): counted now, and the batch ends, once
    assert jobkit(local, jobs_toml, "dlq", "redrive", "page").exit_code == 0
    local.drain()
    assert [(s["total"], s["succeeded"], s["dead_lettered"]) for s in summaries("on_complete")] == [(3, 2, 1)]


def test_a_callback_that_cannot_be_pushed_is_pushed_by_the_redelivery_once(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push(JobSpecification("once", {"script": {}}, id="last"))
    down = callbacks_down(local)
    local.drain(until=local.clock.now() + 1)
    assert down.failed_calls > 0 and CALLBACKS == []
    down.remove()
    local.drain()
    assert len(summaries("on_complete")) == 1
    assert [run.job_id for run in SCRIPTED] == ["last"]  # deliver_once: its redelivery did not run it again


def test_members_on_many_shards_whose_callback_could_not_be_pushed_count_again_in_one_sqs_batch(
    local: LocalStack,
) -> None:
    # (found by the reliability model) their ends were counted before the push failed; when they
    # came back together, each shard's write of an end counted already failed in turn, one per
    # try, and with more such members than tries they went back every time, the callback unpushed
    ids = [i for i in (f"m{n}" for n in range(100)) if shard_of(Member("once", i)) in range(4)]
    ids = [next(i for i in ids if shard_of(Member("once", i)) == shard) for shard in range(4)]
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push([JobSpecification("once", {"script": {}}, id=i) for i in ids])
    down = callbacks_down(local)
    local.drain(until=local.clock.now() + 1)
    assert down.failed_calls > 0 and CALLBACKS == []
    down.remove()
    local.drain()
    assert [(s["total"], s["succeeded"]) for s in summaries("on_complete")] == [(4, 4)]
    assert sorted(run.job_id for run in SCRIPTED) == sorted(ids)  # deliver_once: they came back, unrun


def test_two_copies_of_a_large_members_message_in_one_sqs_batch_both_go_back_when_its_end_is_not_counted(
    local: LocalStack,
) -> None:
    # (found by the reliability model) SQS delivered one message twice, in one batch: the copy
    # that was not sent back had the params object ended, so the one that was came back to an
    # ended object, and was acknowledged as redelivered, uncounted: the batch never ended
    _, copies = _large_member_copies(local, on_complete=JobSpecification("reached", {}))
    down = callbacks_down(local)
    local.mappings["big"].deliver(copies)  # in one SQS batch
    assert down.failed_calls > 0 and CALLBACKS == []
    down.remove()
    local.drain()
    assert [(s["total"], s["succeeded"]) for s in summaries("on_complete")] == [(1, 1)]


def _large_member_copies(local: LocalStack, **callbacks: JobSpecification) -> tuple[BatchRef, list[dict[str, Any]]]:
    """A batch of one large member, and two copies of its message received (SQS delivered it twice)."""
    with local.queue_group("wiki").batch(**callbacks) as batch:
        batch.push(JobSpecification("big", {"script": {}, "pad": "x" * 2048}, id="big"))
    queue = local.queue_url("big")

    def receive() -> dict[str, Any]:
        (message,) = local.sqs.receive_message(
            QueueUrl=queue, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
        )["Messages"]
        return message

    message = receive()
    assert "paramsRef" in message["Body"]
    local.sqs.send_message(QueueUrl=queue, MessageBody=message["Body"], MessageAttributes=message["MessageAttributes"])
    return BatchRef(batch.id, "wiki"), [message, receive()]


def test_a_large_members_late_copy_pushes_the_callbacks_another_invocation_could_not(local: LocalStack) -> None:
    # (found by review) one invocation counts the end and fails to push the callback; the other
    # copy, run while that push is in flight, leaves it to it and removes the params object; the
    # first copy, sent back, comes to an ended object: it counts again, and pushes the callback
    ref, (first, second) = _large_member_copies(local, on_complete=JobSpecification("reached", {}))
    down = callbacks_down(local)
    local.mappings["big"].deliver([first])  # counted; its push failed: it goes back
    down.remove()
    now = local.clock.now()
    assert local.records.batches.claim(ref, "on_complete", "first", now, now + 60)  # its push, still in flight
    local.mappings["big"].deliver([second])
    local.records.batches.release(ref, "on_complete", "first")  # (it failed)
    assert CALLBACKS == []
    local.drain()
    assert [(s["total"], s["succeeded"]) for s in summaries("on_complete")] == [(1, 1)]
    late = [r for r in local.results.results if r.job_type == "big" and r.outcome is Outcome.REDELIVERED]
    assert len(late) == 1 and "removed when its job ended" in str(late[0].reason)


def test_of_two_copies_in_one_sqs_batch_one_that_ran_decides_the_end_over_one_dead_lettered(
    local: LocalStack, jobs_toml: Path
) -> None:
    # (found by review) one copy ran; the other, on its last receive, could not fetch its params
    # (dead-lettered): the member succeeded, and its dead letter, redriven, is a late copy
    from faults import FailCalls

    _, (first, second) = _large_member_copies(
        local, on_complete=JobSpecification("reached", {}), on_success=JobSpecification("reached", {})
    )
    second["Attributes"]["ApproximateReceiveCount"] = "50"  # its last receive
    fetches = iter(range(2))
    down = FailCalls(
        local.client("s3"), "s3.GetObject", code="InternalError", status=500, match=lambda _: next(fetches)
    )
    local.mappings["big"].deliver([first, second])
    down.remove()
    assert [r.outcome for r in local.results.results if r.job_type == "big"] == [
        Outcome.SUCCEEDED,
        Outcome.DEAD_LETTERED,
    ]
    local.drain()
    assert [(s["succeeded"], s["dead_lettered"]) for s in summaries("on_complete")] == [(1, 0)]
    assert len(summaries("on_success")) == 1
    assert jobkit(local, jobs_toml, "dlq", "redrive", "big").exit_code == 0
    local.drain()
    assert len(summaries("on_complete")) == 1 and len(summaries("on_success")) == 1
    assert [r.job_id for r in SCRIPTED] == ["big"]


def test_a_callback_whose_delivery_the_table_cannot_claim_waits_and_runs_once(local: LocalStack) -> None:
    # (found by the reliability model) it ran fail-open, claimless; its invocation died after, and
    # its redelivery, claimless too, ran it again
    from faults import FailCalls

    with local.queue_group("wiki").batch(on_complete=JobSpecification("reached", {})):
        pass  # empty: it ends when sealed, and pushes its callback
    down = FailCalls(local.dynamodb, "dynamodb.UpdateItem", code="ProvisionedThroughputExceededException", status=400)
    local.drain(until=local.clock.now() + 10)
    assert down.failed_calls > 0 and CALLBACKS == []
    waited = [r for r in local.results.results if r.job_type == "reached"]
    assert waited and {r.outcome for r in waited} == {Outcome.DEFERRED}
    assert not any(r.dedup_unavailable for r in waited)  # not run: not counted as run without the store
    assert "runs only once" in str(waited[0].reason)
    down.remove()
    local.drain()
    assert len(summaries("on_complete")) == 1


def test_a_callback_whose_done_mark_is_throttled_once_is_marked_done_and_its_copy_runs_nothing(
    local: LocalStack,
) -> None:
    # (found by review) its "done" mark failed once and was not tried again: the claim stayed
    # "running" until its lease ran out, and a copy delivered after that ran it again
    import json

    from faults import FailCalls

    with local.queue_group("wiki").batch(on_complete=JobSpecification("reached", {})):
        pass
    queue = local.queue_url("reached")
    (message,) = local.sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"])["Messages"]
    local.sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    down = FailCalls(
        local.dynamodb,
        "dynamodb.UpdateItem",
        code="ProvisionedThroughputExceededException",
        status=400,
        match=lambda p: '"done"' in json.dumps(p.get("ExpressionAttributeValues", {}), default=str),
        times=1,
    )
    local.drain()
    assert down.failed_calls == 1 and len(summaries("on_complete")) == 1
    local.clock.advance(3600)  # long past its claim's lease
    local.sqs.send_message(QueueUrl=queue, MessageBody=message["Body"], MessageAttributes=message["MessageAttributes"])
    local.drain()
    assert len(summaries("on_complete")) == 1
    assert [r.outcome for r in local.results.results if r.job_type == "reached"] == [
        Outcome.SUCCEEDED,
        Outcome.REDELIVERED,
    ]


# -- found by review -----------------------------------------------------------------------------


def test_a_push_that_fails_part_way_takes_back_every_member_it_counted_in(local: LocalStack) -> None:
    from itertools import count

    from jobkit.records import TableUnavailable

    from faults import FailCalls

    group = local.queue_group("wiki")
    batch = group.batch(on_complete=JobSpecification("reached", {}), id="half")
    calls = count()
    second = FailCalls(
        local.dynamodb, "dynamodb.TransactWriteItems", code="ThrottlingException", match=lambda p: next(calls) == 1
    )
    with pytest.raises(TableUnavailable):
        batch.push([page(n) for n in range(50)])
    second.remove()
    assert second.failed_calls == 1
    status = group.batch_status("half")
    assert status is not None and status.counts.added == 0  # nothing was sent, and nothing waits
    batch.seal()
    local.drain()
    assert [(s["total"], s["pending"]) for s in summaries("on_complete")] == [(0, 0)]


def test_a_batch_sealed_by_another_request_takes_no_more_pushes(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    mine = group.batch(on_complete=JobSpecification("reached", {}), id="race")
    group.batch(on_complete=JobSpecification("reached", {}), id="race").seal()  # another request, meanwhile
    with pytest.raises(BatchError, match="sealed"):
        mine.push([page(0), page(1)])
    local.drain()
    assert [(s["total"], s["pending"]) for s in summaries("on_complete")] == [(0, 0)]
    assert SCRIPTED == []


def test_a_callback_is_checked_when_the_batch_is_opened(local: LocalStack) -> None:
    from jobkit.core.errors import SpecError

    group = local.queue_group("wiki")
    # its params schema, as the push would check them then (the summary included)
    local.declaration.types["reached"].params_schema.check("reached", "x", {"batch": {}})
    with pytest.raises(BatchError, match="a type and params only"):
        group.batch(on_complete=JobSpecification("reached", {}, id="mine"))
    with pytest.raises(BatchError, match="a type and params only"):
        group.batch(on_complete=JobSpecification("reached", {}, delay=60))
    with pytest.raises(BatchError, match="over the 150,000"):
        group.batch(on_complete=JobSpecification("reached", {"blob": "x" * 200_000}))
    with pytest.raises(SpecError, match="rootJobTimestamp"):  # half root params: a push would refuse it
        group.batch(on_complete=JobSpecification("reached", {"rootJobSignature": "a" * 40}))


def test_a_member_dead_lettered_as_poison_ends_too(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push([page(0), JobSpecification("ghost", {})])
    local.drain()
    assert Outcome.POISONED in {r.outcome for r in local.results.results}
    assert [(s["total"], s["succeeded"], s["dead_lettered"]) for s in summaries("on_complete")] == [(2, 1, 1)]


def test_a_job_that_pushes_members_may_keep_batches_by_its_policy(local: LocalStack) -> None:
    from jobkit.local.cloudformation import translate
    from jobkit.template import build, logical_id

    template = translate(build(local.declaration), parameters={"Prefix": "batches"})
    role = template["Resources"][f"{logical_id('opener')}RunnerRole"]
    sids = {s["Sid"] for p in role["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]}
    assert "KeepBatches" in sids


def test_a_member_sent_once_of_two_copies_in_one_push_stays_counted_in(local: LocalStack) -> None:
    from faults import FailBatchEntries

    group = local.queue_group("wiki")
    batch = group.batch(on_complete=JobSpecification("reached", {}), id="twice")
    refuse = FailBatchEntries(
        local.sqs, lambda entry: entry["Id"] == "1", code="InvalidParameterValue", sender_fault=True, times=1
    )
    with pytest.raises(JobQueueError):
        batch.push([page(0).replace(id="X"), page(0).replace(id="X")])
    refuse.remove()
    batch.seal()
    local.drain()
    assert [(s["total"], s["succeeded"]) for s in summaries("on_complete")] == [(1, 1)]


def test_a_domain_that_starts_with_another_and_a_hash_has_members_of_its_own(
    local: LocalStack, jobs_toml: Path
) -> None:
    for domain, job_id in (("wiki", "mine"), ("wiki#page", "theirs")):
        batch = local.queue_group(domain).batch(on_complete=JobSpecification("reached", {}), id="b")
        batch.push(JobSpecification("page", {"script": {}}, id=job_id))
    result = jobkit(local, jobs_toml, "batch", "b", "--domain", "wiki", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["pending_members"] == [{"type": "page", "id": "mine"}]


def test_a_batch_whose_callback_cannot_be_pushed_after_a_dead_letter_checks_itself_again(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    with group.batch(on_complete=JobSpecification("reached", {})) as batch:
        batch.push(page(0, permanent=True))
    down = callbacks_down(local)
    local.drain(until=local.clock.now() + 30)
    assert down.failed_calls > 0 and CALLBACKS == []
    down.remove()
    local.drain()
    assert [(s["total"], s["dead_lettered"]) for s in summaries("on_complete")] == [(1, 1)]
    checks = [r for r in local.results.results if r.job_type == "jobkitBatchCheck"]
    assert [r.outcome for r in checks] == [Outcome.SUCCEEDED]
