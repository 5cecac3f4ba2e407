"""Large params on the local stack: a job too large for a message has its
params in the payload bucket and runs with them; its message carries the
reference (wire version 3). De-duplication and supersession decide as for an
inline job; a dead-lettered large job is redriven and runs; a missing or
altered object is dead-lettered with its reason; a bucket that cannot answer
is retried."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from jobkit import JobSpecification
from jobkit.cli.__main__ import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import ConfigError, JobQueueError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import canonical_json, new_root_job_params
from jobkit.declaration.config import declaration_to_dict, load_declaration, parse_declaration
from jobkit.endpoint.lambda_handler import endpoint_from_environment
from jobkit.endpoint.service import MAX_BODY_BYTES
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.payloads.reference import params_bytes, type_prefix
from jobkit.records.keys import JobRef
from jobkit.sqs import TYPE_ATTRIBUTE, message_size, string_attribute
from jobkit.ui.app import create_app
from jobkit.ui.csrf import CsrfGuard
from jobkit.ui.settings import UiSettings
from jobkit.wiring import Wiring

import testjobs
from conftest import ROOT, START
from testjobs import BROKEN, CALLBACKS, SCRIPTED, SEEN_PARAMS

DECLARATION = """
[jobkit]
prefix = "big"

[defaults]
backoff = { base_s = 2, factor = 2.0, cap_s = 30, jitter = 0.5 }
max_attempts = 3

[types.render]
class = "testjobs:LargeJob"

[types.once]
class = "testjobs:LargeJob"
remove_duplicates = true

[types.purge]
class = "testjobs:LargeJob"

[types.tracked]
class = "testjobs:LargeJob"
track_status = true
batches = true
params_schema = { required = ["name", "blob"] }

[types.cheap]
class = "testjobs:LargeJob"
offload_above_kb = 64

[types.reached]
class = "testjobs:CallbackJob"
batch_callback = true

[push_endpoint]
types = ["render"]
"""

MIB = 1024 * 1024


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture
def local(jobs_toml: Path) -> Iterator[LocalStack]:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    for kept in (SCRIPTED, BROKEN, SEEN_PARAMS, CALLBACKS):
        kept.clear()
    with LocalStack(load_declaration(jobs_toml), clock=clock, seed=5) as stack:
        yield stack
    for kept in (SCRIPTED, BROKEN, SEEN_PARAMS):
        kept.clear()


def big(job_type: str, name: str, mib: float = 3, **script: Any) -> JobSpecification:
    blob = (name * (int(mib * MIB) // max(1, len(name)) + 1))[: int(mib * MIB)]
    return JobSpecification(job_type, {"name": name, "blob": blob, "script": script}, domain="wiki")


def digest(params: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(params).encode("utf-8")).hexdigest()


def objects(local: LocalStack) -> list[dict[str, Any]]:
    listed = local.client("s3").list_objects_v2(Bucket=local.payload_bucket)
    return list(listed.get("Contents", []))


def test_a_job_of_3_mib_runs_with_its_params_and_its_message_is_small(local: LocalStack) -> None:
    spec = big("render", "page")
    local.queue_group("wiki").push(spec)
    [message] = local.sqs.receive_message(QueueUrl=local.queue_url("render"), VisibilityTimeout=0)["Messages"]
    assert len(message["Body"].encode("utf-8")) < 4096
    body = json.loads(message["Body"])
    assert body["v"] == 3 and "params" not in body
    jsonschema.validate(body, json.loads((ROOT / "docs" / "job-spec.schema.json").read_text()))
    assert body["paramsRef"]["size"] == len(params_bytes(spec.params))
    [stored] = objects(local)
    assert stored["Key"] == body["paramsRef"]["key"] and stored["Key"].startswith(type_prefix("render"))
    local.drain()
    assert [(job_id, seen) for job_id, seen, _ in SEEN_PARAMS] == [(spec.id, digest(spec.params))]
    assert [r.outcome for r in local.results.results] == [Outcome.SUCCEEDED]


def test_a_small_job_stays_inline(local: LocalStack) -> None:
    local.queue_group("wiki").push(JobSpecification("render", {"name": "small", "script": {}}))
    [message] = local.sqs.receive_message(QueueUrl=local.queue_url("render"), VisibilityTimeout=0)["Messages"]
    assert json.loads(message["Body"])["v"] == 1 and objects(local) == []


def test_a_remove_duplicates_pair_of_large_jobs_runs_once(local: LocalStack) -> None:
    first, second = big("once", "same"), big("once", "same")
    local.queue_group("wiki").push([first, second])
    local.clock.advance(1)  # they run after they were enqueued
    local.drain()
    assert len(SEEN_PARAMS) == 1
    outcomes = sorted(r.outcome.value for r in local.results.results)
    assert outcomes == sorted([Outcome.SUCCEEDED.value, Outcome.DUPLICATE.value])


def test_a_large_leaf_is_superseded_by_a_newer_root_as_an_inline_one_is(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    older = new_root_job_params("template:X", local.clock.now())
    group.push(JobSpecification("purge", {**big("purge", "old").params, **older}, domain="wiki"))
    local.clock.advance(5)
    newer = new_root_job_params("template:X", local.clock.now())
    group.push(JobSpecification("purge", {"name": "new", "script": {}, **newer}, domain="wiki"))
    local.drain()
    outcomes = {r.job_id: r.outcome for r in local.results.results}
    assert sorted(o.value for o in outcomes.values()) == sorted([Outcome.SUCCEEDED.value, Outcome.SUPERSEDED.value])
    assert [params_digest for _, params_digest, _ in SEEN_PARAMS] == [digest({"name": "new", "script": {}, **newer})]


def test_a_large_job_that_fails_for_good_is_dead_lettered_shown_redriven_and_runs(
    local: LocalStack, jobs_toml: Path
) -> None:
    BROKEN.add("down")
    spec = big("render", "fragile", broken="down")
    local.queue_group("wiki").push(spec)
    local.drain()
    [dead] = local.dead_letters("render")
    assert json.loads(dead["Body"])["v"] == 3  # the DLQ copy keeps the reference
    local.clock.advance(1)  # (visible again)
    shown = CliRunner().invoke(
        main, ["dlq", "list", "render", "--json"], obj=CliConfig(config_path=jobs_toml, clock=local.clock)
    )
    assert shown.exit_code == 0, shown.output
    assert spec.id in shown.output
    BROKEN.discard("down")
    local.clock.advance(1)  # moto shows a message released at the frozen clock's instant from the next ms on
    redriven = CliRunner().invoke(
        main, ["dlq", "redrive", "render"], obj=CliConfig(config_path=jobs_toml, clock=local.clock)
    )
    assert redriven.exit_code == 0, redriven.output
    local.drain()
    assert [seen for _, seen, _ in SEEN_PARAMS] == [digest(spec.params)] * 2  # failed once, then ran again
    assert [r.outcome for r in local.results.results] == [Outcome.DEAD_LETTERED, Outcome.SUCCEEDED]


def test_a_missing_object_is_dead_lettered_with_the_reason(local: LocalStack) -> None:
    spec = big("render", "gone", mib=1.5)
    local.queue_group("wiki").push(spec)
    [stored] = objects(local)
    local.client("s3").delete_object(Bucket=local.payload_bucket, Key=stored["Key"])
    local.drain()
    assert SEEN_PARAMS == []
    [dead] = local.dead_letters("render")
    attributes = dead["MessageAttributes"]
    assert attributes["jobkit.errorClass"]["StringValue"] == "PayloadMissing"
    assert "is not in the payload bucket" in attributes["jobkit.error"]["StringValue"]


def test_an_altered_object_is_dead_lettered_with_the_reason(local: LocalStack) -> None:
    spec = big("render", "tampered", mib=1.5)
    local.queue_group("wiki").push(spec)
    [stored] = objects(local)
    altered = params_bytes({**spec.params, "name": "tampere2"})  # the same size: only the SHA-256 tells
    local.client("s3").put_object(Bucket=local.payload_bucket, Key=stored["Key"], Body=altered)
    local.drain()
    assert SEEN_PARAMS == []
    [dead] = local.dead_letters("render")
    attributes = dead["MessageAttributes"]
    assert attributes["jobkit.errorClass"]["StringValue"] == "PayloadCorrupt"
    assert "has the SHA-256" in attributes["jobkit.error"]["StringValue"]


def test_a_bucket_that_cannot_answer_is_retried_and_the_job_then_runs(
    local: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = big("render", "patient", mib=1.5)
    local.queue_group("wiki").push(spec)
    [runner] = [r for name, r in local.runners.items() if name == "render"]
    store = runner.intake.payloads
    assert store is not None
    monkeypatch.setattr(store, "bucket", "no-such-bucket")  # NoSuchBucket: S3 cannot answer for it
    local.drain(until=local.clock.now() + 1)
    assert SEEN_PARAMS == [] and local.queue_depth("render", dlq=True) == 0
    assert local.results.results[0].outcome is Outcome.RETRIED
    monkeypatch.undo()
    local.drain()
    assert [(job_id, seen) for job_id, seen, _ in SEEN_PARAMS] == [(spec.id, digest(spec.params))]
    assert local.results.results[-1].outcome is Outcome.SUCCEEDED


def test_a_reference_to_another_jobs_params_is_poison(local: LocalStack) -> None:
    spec = big("render", "victim", mib=1.5)
    local.queue_group("wiki").push(spec)
    [message] = local.sqs.receive_message(QueueUrl=local.queue_url("render"), VisibilityTimeout=0)["Messages"]
    forged = {**json.loads(message["Body"]), "id": "forged-1"}  # the victim's object, under another job's ID
    local.sqs.send_message(QueueUrl=local.queue_url("render"), MessageBody=json.dumps(forged))
    local.drain()
    assert [seen_id for seen_id, _, _ in SEEN_PARAMS] == [spec.id]
    [dead] = local.dead_letters("render")
    assert "paramsRef.key must be the job's own key" in dead["MessageAttributes"]["jobkit.error"]["StringValue"]


def test_without_a_bucket_a_job_too_large_is_refused_at_push_naming_the_remedy(local: LocalStack) -> None:
    # a producer not given the stack's payload bucket
    producer = Wiring(local.declaration, clients=local.clients, clock=local.clock, queue_urls=local.queue_urls)
    group = producer.group("wiki")
    with pytest.raises(JobQueueError, match=r"give the stack its payload bucket \(\$JOBKIT_PAYLOAD_BUCKET\)"):
        group.push(big("render", "nowhere", mib=1.5))


def test_a_large_batch_member_whose_object_is_gone_is_counted_dead_lettered_and_its_status_says_so(
    local: LocalStack, jobs_toml: Path
) -> None:
    group = local.queue_group("wiki")
    lost, kept = big("tracked", "lost", mib=1.2), big("tracked", "kept", mib=1.2)
    with group.batch(on_complete=JobSpecification("reached", {"edit": 1})) as batch:
        batch.push([lost, kept])
    lost_key = next(o["Key"] for o in objects(local) if f"/{lost.id}/" in o["Key"])
    local.client("s3").delete_object(Bucket=local.payload_bucket, Key=lost_key)
    local.drain()
    # the batch counted both ends, and its callback ran once
    [(_, _, params)] = CALLBACKS
    assert (params["batch"]["succeeded"], params["batch"]["dead_lettered"], params["batch"]["pending"]) == (1, 1, 0)
    status = group.status("tracked", lost.id)
    assert status is not None and status.state == "dead_lettered"
    assert local.journal().failures(JobRef("tracked", "wiki", lost.id))[0].error_class == "PayloadMissing"
    # the DLQ tools tell the runner's reason, not a params check of params they do not have
    local.clock.advance(1)
    shown = CliRunner().invoke(
        main, ["dlq", "list", "tracked", "--json"], obj=CliConfig(config_path=jobs_toml, clock=local.clock)
    )
    [message] = json.loads(shown.output)["messages"]
    assert "PayloadMissing" in json.dumps(message) and "InvalidParams" not in json.dumps(message)


def test_the_rest_of_a_large_body_is_checked_before_the_bucket_is_read(local: LocalStack) -> None:
    spec = big("render", "ahead", mib=1.2)
    local.queue_group("wiki").push(spec)
    [message] = local.sqs.receive_message(QueueUrl=local.queue_url("render"), VisibilityTimeout=0)["Messages"]
    ahead = {**json.loads(message["Body"]), "enqueuedAt": local.clock.now() + 10 * 86400}
    local.sqs.delete_message(QueueUrl=local.queue_url("render"), ReceiptHandle=message["ReceiptHandle"])
    for stored in objects(local):  # were the bucket read, the reason would be PayloadMissing
        local.client("s3").delete_object(Bucket=local.payload_bucket, Key=stored["Key"])
    local.sqs.send_message(QueueUrl=local.queue_url("render"), MessageBody=json.dumps(ahead))
    local.drain()
    [dead] = local.dead_letters("render")
    assert "ahead of" in dead["MessageAttributes"]["jobkit.error"]["StringValue"]


def test_a_domain_with_a_character_sqs_refuses_is_sent_as_the_inline_body_would_be(local: LocalStack) -> None:
    spec = JobSpecification("render", {**big("render", "odd", mib=1.2).params}, domain="wiki\ufffe")
    local.queue_group().push(spec)
    local.drain()
    assert [job_id for job_id, _, _ in SEEN_PARAMS] == [spec.id]


def test_a_bucket_that_never_answers_dead_letters_the_job_on_the_last_receive_with_the_reason(
    local: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = big("tracked", "stuck", mib=1.2)
    local.queue_group("wiki").push(spec)
    store = local.runners["tracked"].intake.payloads
    assert store is not None
    monkeypatch.setattr(store, "bucket", "no-such-bucket")
    local.drain()
    assert SEEN_PARAMS == []
    [dead] = local.dead_letters("tracked")
    assert dead["MessageAttributes"]["jobkit.reason"]["StringValue"] == "unavailable"
    status = local.queue_group("wiki").status("tracked", spec.id)
    assert status is not None and status.state == "dead_lettered"


def test_the_push_endpoints_lambda_takes_a_5_mb_request_and_puts_the_params_in_the_bucket(local: LocalStack) -> None:
    # the endpoint's function as its Lambda builds it, from the environment the template gives it
    environ = {
        "JOBKIT_DECLARATION": json.dumps(declaration_to_dict(local.declaration.for_endpoint())),
        "JOBKIT_QUEUE_URLS": json.dumps(local.queue_urls),
        "JOBKIT_PAYLOAD_BUCKET": str(local.payload_bucket),
    }
    endpoint = endpoint_from_environment(environ, clock=local.clock)
    params = big("render", "posted", mib=4.8).params
    body = json.dumps({"jobs": [{"type": "render", "id": "posted-1", "params": params, "domain": "wiki"}]}).encode()
    assert 5_000_000 < len(body) <= MAX_BODY_BYTES
    response = endpoint.handle("POST", {}, body)
    assert response.status == 200, response.body
    local.drain()
    assert [(job_id, seen) for job_id, seen, _ in SEEN_PARAMS] == [("posted-1", digest(params))]


# -- a declared threshold --------------------------------------------------------------------------


def test_a_type_with_a_threshold_offloads_what_is_over_it_and_each_message_stays_within_it(local: LocalStack) -> None:
    group = local.queue_group("wiki")
    over, under = big("cheap", "over", mib=0.1), big("cheap", "under", mib=0.05)
    group.push([over, under])
    messages = local.sqs.receive_message(
        QueueUrl=local.queue_url("cheap"), VisibilityTimeout=0, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    versions = {json.loads(m["Body"])["id"]: json.loads(m["Body"])["v"] for m in messages}
    assert versions == {over.id: 3, under.id: 1}
    assert all(message_size(m["Body"], m["MessageAttributes"]) <= 64 * 1024 for m in messages)
    local.drain()
    assert sorted(seen for _, seen, _ in SEEN_PARAMS) == sorted([digest(over.params), digest(under.params)])


def test_a_job_just_under_the_threshold_goes_to_the_bucket_when_its_attributes_take_it_over(
    local: LocalStack,
) -> None:
    # the body and its type attribute are 10 bytes under 64 KiB; the correlation ID push adds takes it over
    empty = big("cheap", "edge", mib=0).stamped(local.clock.now()).to_message()
    typed = message_size(empty, {TYPE_ATTRIBUTE: string_attribute("cheap")})
    spec = big("cheap", "edge", mib=(64 * 1024 - typed - 10) / MIB)
    local.queue_group("wiki").push(spec)
    [message] = local.sqs.receive_message(
        QueueUrl=local.queue_url("cheap"), VisibilityTimeout=0, MessageAttributeNames=["All"]
    )["Messages"]
    assert json.loads(message["Body"])["v"] == 3
    assert message_size(message["Body"], message["MessageAttributes"]) <= 64 * 1024


@pytest.mark.parametrize("value", [0, 1025, "64", 64.5, True])
def test_a_threshold_that_is_not_whole_kib_within_a_message_is_refused_naming_the_key(value: object) -> None:
    raw = {"types": {"cheap": {"class": "testjobs:LargeJob", "offload_above_kb": value}}}
    with pytest.raises(ConfigError, match=r"types\.cheap\.offload_above_kb: must be a whole number of KiB"):
        parse_declaration(raw, source="jobs.toml")


# -- the DLQ tools fetch a large dead letter's params on request ---------------------------------


@pytest.fixture
def dead_large(local: LocalStack) -> JobSpecification:
    BROKEN.add("down")
    spec = big("render", "heavy", mib=1.2, broken="down")
    local.queue_group("wiki").push(spec)
    local.drain()
    assert local.queue_depth("render", dlq=True) == 1
    local.clock.advance(1)  # (visible again)
    return spec


def show(jobs_toml: Path, local: LocalStack, *args: str) -> Any:
    shown = CliRunner().invoke(
        main, ["dlq", "show", "render", *args], obj=CliConfig(config_path=jobs_toml, clock=local.clock)
    )
    assert shown.exit_code == 0, shown.output
    local.clock.advance(1)
    return shown.output


def test_dlq_show_fetches_a_large_dead_letters_params_only_with_params(
    local: LocalStack, jobs_toml: Path, dead_large: JobSpecification, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBKIT_PAYLOAD_BUCKET", str(local.payload_bucket))
    [plain] = json.loads(show(jobs_toml, local, dead_large.id, "--json"))["messages"]
    assert set(plain["params_ref"]) == {"key", "size", "sha256"}  # where they are, not what
    [fetched] = json.loads(show(jobs_toml, local, dead_large.id, "--params", "--json"))["messages"]
    assert fetched["params_ref"]["params"] == dead_large.params
    text = show(jobs_toml, local, dead_large.id)
    assert "--params fetches them" in text and "heavyheavy" not in text
    assert "heavyheavy" in show(jobs_toml, local, dead_large.id, "--params")


def test_dlq_show_says_why_it_could_not_fetch_and_the_dead_letter_stays(
    local: LocalStack, jobs_toml: Path, dead_large: JobSpecification, monkeypatch: pytest.MonkeyPatch
) -> None:
    [no_bucket] = json.loads(show(jobs_toml, local, dead_large.id, "--params", "--json"))["messages"]
    assert "JOBKIT_PAYLOAD_BUCKET" in no_bucket["params_ref"]["problem"]
    monkeypatch.setenv("JOBKIT_PAYLOAD_BUCKET", str(local.payload_bucket))
    [stored] = objects(local)
    local.client("s3").delete_object(Bucket=local.payload_bucket, Key=stored["Key"])
    [gone] = json.loads(show(jobs_toml, local, dead_large.id, "--params", "--json"))["messages"]
    assert "is not in the payload bucket" in gone["params_ref"]["problem"] and "params" not in gone["params_ref"]
    assert local.queue_depth("render", dlq=True) == 1


def test_the_web_views_job_page_fetches_a_large_dead_letters_params_when_its_link_asks(
    local: LocalStack, jobs_toml: Path, dead_large: JobSpecification, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBKIT_PAYLOAD_BUCKET", str(local.payload_bucket))
    app = create_app(CliConfig(config_path=jobs_toml, clock=local.clock), UiSettings(), csrf=CsrfGuard("t" * 32))
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    page = client.get("/types/render/job", params={"id": dead_large.id}).text
    assert "fetch them" in page and "heavyheavy" not in page
    local.clock.advance(1)
    link = re.search(r'<a class="fetch-params" href="([^"]+)"', page)
    assert link is not None
    fetched = client.get(link.group(1).replace("&amp;", "&")).text
    details = re.search(r"<details([^>]*)>(.*?)</details>", fetched, re.S)
    assert details is not None and "open" in details.group(1) and "heavyheavy" in details.group(2)


# -- an ended job's object is removed, and a mark says so -------------------------------------------


def keys_of(local: LocalStack, spec: JobSpecification) -> list[str]:
    return sorted(o["Key"].rsplit("/", 1)[1].split(".", 1)[1] for o in objects(local) if f"/{spec.id}/" in o["Key"])


def test_the_object_of_a_job_that_ended_is_removed_and_one_whose_message_may_come_back_is_kept(
    local: LocalStack,
) -> None:
    group = local.queue_group("wiki")
    ran, twin = big("once", "same", mib=1.2), big("once", "same", mib=1.2)
    group.push(ran)
    local.drain()
    group.push(twin)  # identical, enqueued after the first ran: a duplicate
    BROKEN.add("down")
    failing = big("render", "failing", mib=1.2, broken="down")
    later = big("render", "later", mib=1.2).replace(release_at=local.clock.now() + 3600)
    group.push([failing, later])
    local.drain(until=local.clock.now() + 600)  # the failing job dead-lettered; the later one not yet released
    assert [k.split(".")[1] for k in keys_of(local, ran)] == ["ended"]  # (the push's own digits, then the mark)
    assert [k.split(".")[1] for k in keys_of(local, twin)] == ["ended"]
    assert [k.split(".")[1] for k in keys_of(local, failing)] == ["json"]  # in the DLQ: shown and redriven from it
    assert [k.split(".")[1] for k in keys_of(local, later)] == ["json"]  # still to run
    local.drain()
    assert [k.split(".")[1] for k in keys_of(local, later)] == ["ended"]


def test_a_late_copy_of_a_large_job_that_ended_is_acknowledged_and_its_status_stays(local: LocalStack) -> None:
    spec = big("tracked", "late", mib=1.2)
    local.queue_group("wiki").push(spec)
    [message] = local.sqs.receive_message(QueueUrl=local.queue_url("tracked"), VisibilityTimeout=0)["Messages"]
    local.drain()
    # the same message again: a delete that was lost, SQS's at-least-once
    local.sqs.send_message(QueueUrl=local.queue_url("tracked"), MessageBody=message["Body"])
    local.drain()
    assert [r.outcome for r in local.results.results] == [Outcome.SUCCEEDED, Outcome.REDELIVERED]
    assert "removed when its job ended" in (local.results.results[1].reason or "")
    status = local.queue_group("wiki").status("tracked", spec.id)
    assert status is not None and status.state == "succeeded"
    assert local.queue_depth("tracked", dlq=True) == 0


def test_two_pushes_of_one_job_have_objects_of_their_own_so_the_first_ending_takes_nothing_from_the_second(
    local: LocalStack,
) -> None:
    group = local.queue_group("wiki")
    spec = big("render", "again", mib=1.2)
    group.push(spec)
    group.push(spec.replace(release_at=local.clock.now() + 2 * 86400))  # the same job ID and params, pushed again
    local.drain(until=local.clock.now() + 600)
    assert sorted(k.split(".")[1] for k in keys_of(local, spec)) == ["ended", "json"]
    local.drain()
    assert [job_id for job_id, _, _ in SEEN_PARAMS] == [spec.id, spec.id]
    assert [r.outcome for r in local.results.results][-1] is Outcome.SUCCEEDED


def test_a_mark_that_cannot_be_written_loses_nothing_and_keeps_the_object(
    local: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = local.runners["render"].intake.payloads
    assert store is not None

    def refused(ref: Any) -> None:
        raise RuntimeError("AccessDenied: s3:PutObject")

    monkeypatch.setattr(store, "end", refused)
    spec = big("render", "unmarked", mib=1.2)
    local.queue_group("wiki").push(spec)
    local.drain()
    assert [r.outcome for r in local.results.results] == [Outcome.SUCCEEDED]
    assert local.queue_depth("render") == 0 and local.queue_depth("render", dlq=True) == 0
    assert [k.split(".")[1] for k in keys_of(local, spec)] == ["json"]  # the long rule removes it
    rules = local.client("s3").get_bucket_lifecycle_configuration(Bucket=local.payload_bucket)["Rules"]
    assert [(r["Filter"]["Prefix"], r["Expiration"]["Days"]) for r in rules] == [("params/", 409)]
