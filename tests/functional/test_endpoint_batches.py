"""Batches through the HTTP push endpoint, on the local stack's queues, table
and runners: ``"batches": [...]`` opened before a request's jobs and sealed
after, a batch that spans requests, ``GET ?batch=ID&domain=D``, each entry
answered on its own; over HTTP as `jobkit local up` serves it (SigV4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_push import fresh_aws, get, post, signed

from jobkit.core.clock import SystemClock, VirtualClock
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.local.push_route import PATH

import testjobs
from conftest import START
from testjobs import CALLBACKS, SCRIPTED

DECLARATION = """
[jobkit]
prefix = "epbatch"

[defaults]
timeout_s = 60

[types.row]
class = "testjobs:ScriptedJob"
batches = true
max_attempts = 1

[types.done]
class = "testjobs:CallbackJob"
batch_callback = true

[types.loose]
class = "testjobs:ScriptedJob"
queue = "row"

[types.hidden]
# a callback type the endpoint does not take
class = "testjobs:CallbackJob"
queue = "done"
batch_callback = true

[push_endpoint]
types = ["row", "done", "loose"]
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[LocalStack]:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    SCRIPTED.clear()
    CALLBACKS.clear()
    with fresh_aws(), LocalStack(load_declaration(path), clock=clock, seed=3, server=True) as stack:
        yield stack
    SCRIPTED.clear()
    CALLBACKS.clear()
    testjobs.use_clock(SystemClock())


def send(local: LocalStack, request: Any) -> tuple[int, Any]:
    url, body = f"{local.endpoint_url}{PATH}", json.dumps(request).encode()
    return post(url, body, signed(url, body))


def read(local: LocalStack, query: str) -> tuple[int, Any]:
    url = f"{local.endpoint_url}{PATH}?{query}"
    return get(url, signed(url, b"", method="GET"))


def row(n: int, batch: str | None = "import-7", **script: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "row", "id": f"row-{n}", "domain": "wiki", "params": {"n": n, "script": script}}
    if batch is not None:
        body["batch"] = {"id": batch}
    return body


IMPORT = {
    "id": "import-7",
    "domain": "wiki",
    "description": "upload 7",
    "onComplete": {"type": "done", "params": {"upload": 7}},
}


def test_a_batch_pushed_over_two_requests_ends_once_after_its_seal(served: LocalStack) -> None:
    status, answer = send(served, {"batches": [IMPORT], "jobs": [row(0), row(1, permanent=True)]})
    assert status == 200, answer
    assert answer["batches"] == [{"index": 0, "id": "import-7", "status": "open"}]
    assert [j["status"] for j in answer["jobs"]] == ["enqueued", "enqueued"]
    served.drain()
    assert CALLBACKS == []  # not sealed: more may come
    status, answer = send(served, {"batches": [{**IMPORT, "seal": True}], "jobs": [row(2)]})
    assert status == 200 and answer["batches"][0]["status"] == "sealed", answer
    served.drain()
    [(_, _, params)] = CALLBACKS
    assert params["upload"] == 7 and (params["batch"]["total"], params["batch"]["dead_lettered"]) == (3, 1)
    status, report = read(served, "batch=import-7&domain=wiki")
    assert status == 200 and report["batch"]["ended"] is True and report["batch"]["counts"]["succeeded"] == 2
    assert report["batch"]["failed_members"] == [{"type": "row", "id": "row-1", "end": "dead_lettered"}]
    # the same request sent again (a producer that timed out): the batch says it is sealed, its jobs are refused
    status, answer = send(served, {"batches": [{**IMPORT, "seal": True}], "jobs": [row(2)]})
    assert status == 207 and answer["batches"][0]["status"] == "sealed"
    assert answer["jobs"][0]["status"] == "refused" and "sealed" in answer["jobs"][0]["error"]
    served.drain()
    assert len(CALLBACKS) == 1


def test_what_a_batch_entry_cannot_be_is_refused_on_its_own(served: LocalStack) -> None:
    entries: list[tuple[Any, str]] = [
        ("import-7", "a batch is a JSON object"),
        ({"id": "a b"}, "a batch ID must match"),
        ({"id": "x", "onComplete": {"type": "hidden"}}, "does not take 'hidden'"),
        ({"id": "x", "onComplete": {"type": "row"}}, "batch_callback = true"),
        ({"id": "x", "onComplete": {"type": "done", "extra": 1}}, '{"type": T'),
        ({"id": "x", "seal": "yes"}, "seal is true or false"),
        ({"id": "x", "onSucess": {}}, "unknown field 'onSucess'"),
    ]
    status, answer = send(served, {"batches": [raw for raw, _ in entries], "jobs": [row(9, batch=None, ok=1)]})
    assert status == 207
    for (raw, words), got in zip(entries, answer["batches"], strict=True):
        assert got["status"] == "refused" and words in got["error"], (raw, got)
    assert answer["jobs"][0]["status"] == "enqueued"  # a job outside batches is not held up
    # a batch's ID opened with other callbacks, jobs of a batch never opened, of a type without batches
    assert send(served, {"batches": [IMPORT]})[0] == 200
    other = {**IMPORT, "onComplete": {"type": "done", "params": {"upload": 8}}}
    status, answer = send(
        served,
        {
            "batches": [other],
            "jobs": [row(1, batch="never"), {**row(2), "type": "loose"}, row(3)],
        },
    )
    assert answer["batches"][0]["status"] == "refused" and "other callbacks" in answer["batches"][0]["error"]
    # (row 3's batch is import-7, whose entry in this request was refused: not the producer's to join)
    assert [j["status"] for j in answer["jobs"]] == ["refused", "refused", "refused"]
    assert "never opened" in answer["jobs"][0]["error"] and "batches = true" in answer["jobs"][1]["error"]
    assert "not opened by this request" in answer["jobs"][2]["error"]
    # and GET of a batch never opened, or a malformed one
    assert read(served, "batch=nope&domain=wiki")[0] == 404
    assert read(served, "batch=a%20b")[0] == 400
    assert read(served, "batch=x&batch=y")[0] == 400
    served.drain()


def test_the_endpoint_role_may_keep_its_types_batches(tmp_path: Path) -> None:
    from jobkit.template import build

    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    template = build(load_declaration(path))
    statements = template["Resources"]["PushEndpoint"]["Properties"]["Policies"][0]["Statement"]
    assert "KeepBatches" in {s.get("Sid") for s in statements}


def test_a_batch_whose_job_was_not_enqueued_is_not_sealed(served: LocalStack) -> None:
    from faults import FailCalls

    down = FailCalls(served.sqs, "sqs.SendMessageBatch", code="InternalError", status=500, times=50)
    status, answer = send(served, {"batches": [{**IMPORT, "seal": True}], "jobs": [row(0)]})
    down.remove()
    assert status == 207 and answer["jobs"][0]["status"] == "failed"
    assert answer["batches"][0]["status"] == "open" and "not sealed" in answer["batches"][0]["error"]
    # sent again, it is counted in, and sealed
    status, answer = send(served, {"batches": [{**IMPORT, "seal": True}], "jobs": [row(0)]})
    assert status == 200 and answer["batches"][0]["status"] == "sealed", answer
    served.drain()
    assert [p["batch"]["total"] for _, _, p in CALLBACKS] == [1]


def test_a_malformed_batch_a_refused_entry_s_jobs_and_a_forged_chain_are_refused_alone(served: LocalStack) -> None:
    # found by review: a job whose batch field was malformed failed the whole request after others were sent;
    # a job joined a batch whose entry the request had refused (another producer's); a chain field was taken
    assert send(served, {"batches": [IMPORT]})[0] == 200
    theirs = {**IMPORT, "onComplete": {"type": "done", "params": {"upload": 8}}, "seal": True}
    jobs = [
        row(0, batch="fresh"),
        {**row(1), "batch": {"ID": "import-7"}},
        {**row(2), "batch": {"id": ["import-7"]}},
        row(3),  # import-7: its entry in this request is refused
        {**row(4, batch="fresh"), "chain": {"id": "victim", "step": 7, "previousResult": {"admin": True}}},
    ]
    status, answer = send(served, {"batches": [{"id": "fresh", "domain": "wiki", "seal": True}, theirs], "jobs": jobs})
    assert status == 207
    assert [j["status"] for j in answer["jobs"]] == ["enqueued", "refused", "refused", "refused", "refused"]
    assert "not opened by this request" in answer["jobs"][3]["error"]
    assert "chain is jobkit's" in answer["jobs"][4]["error"]
    assert [b["status"] for b in answer["batches"]] == ["open", "refused"]  # fresh lost jobs: not sealed
    status, report = read(served, "batch=import-7&domain=wiki")
    assert status == 200 and report["batch"]["counts"]["total"] == 0
    served.drain()
