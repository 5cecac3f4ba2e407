"""Cancellations and job status through the HTTP push endpoint, on the local
stack's queues, table and runners: ``"cancel": [...]`` beside or instead of
``"jobs"``, answered per entry, and ``GET ?type=T&id=ID&domain=D``, over HTTP
as `jobkit local up` serves them (SigV4, or the HMAC producer signature), and
through the Lambda handler built from the environment the template gives it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from http_push import fresh_aws, get, post, signed

from jobkit.core.clock import SystemClock, VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import load_declaration
from jobkit.endpoint.lambda_handler import endpoint_from_environment, handle_event
from jobkit.endpoint.options import EndpointOptions
from jobkit.endpoint.service import MAX_JOBS
from jobkit.endpoint.signature import sign
from jobkit.local import LocalStack
from jobkit.local.cloudformation import translate
from jobkit.local.provision import provision_table
from jobkit.local.push_route import LOCAL_HMAC_KEY, PATH
from jobkit.template import build

import testjobs
from conftest import START, string_like
from testjobs import SCRIPTED

DECLARATION = """
[jobkit]
prefix = "epcancel"

[defaults]
timeout_s = 60
backoff = { base_s = 2, factor = 2.0, cap_s = 30, jitter = 0.5 }

[types.report]
class = "testjobs:ScriptedJob"
cancellable = true
track_status = true

[types.mail]
class = "testjobs:ScriptedJob"
queue = "report"
cancellable = true

[types.plain]
class = "testjobs:ScriptedJob"
queue = "report"

[types.once]
class = "testjobs:ScriptedJob"
queue = "report"
cancellable = true
deliver_once = true

[types.internal]
# declared, cancellable and tracked, but not a type the endpoint takes
class = "testjobs:ScriptedJob"
queue = "report"
cancellable = true
track_status = true

[push_endpoint]
types = ["report", "mail", "plain", "once"]
"""
NONE_COUNTED = {"cancelled": 0, "ended": 0, "refused": 0, "failed": 0}
ARN = "arn:aws:sts::123456789012:assumed-role/billing-app/i-0abc"


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture
def clock() -> Iterator[VirtualClock]:
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    SCRIPTED.clear()
    yield clock
    SCRIPTED.clear()
    testjobs.use_clock(SystemClock())


@pytest.fixture
def served(jobs_toml: Path, clock: VirtualClock) -> Iterator[LocalStack]:
    """The stack with its push endpoint (``auth = "iam"``) on a port, as `jobkit local up` serves it."""
    with fresh_aws(), LocalStack(load_declaration(jobs_toml), clock=clock, seed=3, server=True) as stack:
        yield stack


def job(job_type: str, job_id: str, domain: str | None = "wiki") -> dict[str, Any]:
    return {"type": job_type, "id": job_id, "domain": domain, "params": {"script": {}}}


def send(local: LocalStack, request: Any) -> tuple[int, Any]:
    """POST a request, signed with SigV4 as an app's AWS SDK signs it."""
    url, body = f"{local.endpoint_url}{PATH}", json.dumps(request).encode()
    return post(url, body, signed(url, body))


def status_of(local: LocalStack, query: str) -> tuple[int, Any]:
    """GET ``?{query}``, signed with SigV4."""
    url = f"{local.endpoint_url}{PATH}?{query}"
    return get(url, signed(url, b"", method="GET"))


def outcomes(local: LocalStack) -> dict[tuple[str | None, str], Outcome]:
    return {(r.domain, r.job_id or ""): r.outcome for r in local.results.results if r.outcome.is_final}


def reason_of(local: LocalStack, job_id: str) -> str:
    return next(r.reason or "" for r in local.results.results if r.job_id == job_id)


def test_a_job_cancelled_through_the_endpoint_never_runs(served: LocalStack) -> None:
    assert send(served, {"jobs": [job("report", "r1"), job("report", "r2")]})[0] == 200
    # When r1 is cancelled through the endpoint before a runner receives it
    status, answer = send(served, {"cancel": [{"type": "report", "id": "r1", "domain": "wiki"}]})
    assert (status, answer) == (
        200,
        {
            "cancelCounts": {**NONE_COUNTED, "cancelled": 1},
            "cancel": [{"index": 0, "id": "r1", "type": "report", "status": "cancelled"}],
        },
    )
    served.drain()
    # Then it never ran, and ended cancelled by the endpoint; r2 ran
    assert [run.job_id for run in SCRIPTED] == ["r2"]
    assert outcomes(served) == {("wiki", "r1"): Outcome.CANCELLED, ("wiki", "r2"): Outcome.SUCCEEDED}
    assert reason_of(served, "r1").startswith("cancelled by push endpoint at 2027-01-15T08:00:00")
    # and a cancellation of either now says it had ended (recorded all the same)
    status, answer = send(served, {"cancel": [{"type": "report", "id": i, "domain": "wiki"} for i in ("r1", "r2")]})
    assert status == 200 and [a["status"] for a in answer["cancel"]] == ["ended", "ended"]
    assert answer["cancelCounts"] == {**NONE_COUNTED, "ended": 2}


def test_cancel_all_spares_the_jobs_pushed_after_its_time_and_other_domains(served: LocalStack) -> None:
    assert send(served, {"jobs": [job("mail", "old-0"), job("mail", "old-1")]})[0] == 200
    assert send(served, {"jobs": [job("mail", "old-0", domain="other")]})[0] == 200  # another job: another domain
    served.clock.advance(10)
    cut = served.clock.now()
    served.clock.advance(10)
    assert send(served, {"jobs": [job("mail", "new")]})[0] == 200
    status, answer = send(served, {"cancel": [{"type": "mail", "all": True, "pushedBefore": cut, "domain": "wiki"}]})
    assert (status, answer["cancel"]) == (
        200,
        [{"index": 0, "type": "mail", "status": "cancelled", "pushedBefore": cut}],
    )
    served.drain()
    assert outcomes(served) == {
        ("wiki", "old-0"): Outcome.CANCELLED,
        ("wiki", "old-1"): Outcome.CANCELLED,
        ("wiki", "new"): Outcome.SUCCEEDED,
        ("other", "old-0"): Outcome.SUCCEEDED,
    }
    # without pushedBefore: the endpoint's clock (and the domain left out is null)
    status, answer = send(served, {"cancel": [{"type": "mail", "all": True}]})
    assert status == 200 and answer["cancel"][0]["pushedBefore"] == served.clock.now()


TAKEN = "the push endpoint does not take it (it takes mail, once, plain, report)"
REFUSED: list[tuple[Any, str, str]] = [
    ({"type": "nope", "id": "x"}, "UnknownJobType", f"unknown job type 'nope': {TAKEN}"),
    ({"type": "internal", "id": "x"}, "UnknownJobType", f"unknown job type 'internal': {TAKEN}"),
    ({"type": "plain", "id": "x"}, "NotCancellable", "plain: its jobs cannot be cancelled: declare cancellable = true"),
    ({"type": "mail", "id": "has#hash"}, "SpecError", "id must match ^[A-Za-z0-9_-]{1,80}$, got 'has#hash'"),
    ({"type": "mail"}, "SpecError", 'give the job\'s "id", or "all": true (not both)'),
    ({"type": "mail", "id": "x", "all": True}, "SpecError", 'give the job\'s "id", or "all": true (not both)'),
    ({"id": "x"}, "SpecError", "type is a job type's name, got None"),
    ({"type": "mail", "all": False}, "SpecError", "all is true or left out, got False"),
    ({"type": "mail", "all": True, "pushed_before": 1}, "SpecError", "unknown field 'pushed_before'"),
    ({"type": "mail", "id": "x", "pushedBefore": 1}, "SpecError", 'pushedBefore goes with "all": true'),
    ({"type": "mail", "all": True, "pushedBefore": "yesterday"}, "SpecError", "pushedBefore is epoch seconds"),
    # (found by review: a 400-digit integer overflowed a float check, after the request's jobs were sent)
    ({"type": "mail", "all": True, "pushedBefore": 10**400}, "SpecError", "pushedBefore is epoch seconds"),
    ({"type": "mail", "all": True, "pushedBefore": START + 3_600}, "JobKitError", "in the future: a watermark"),
    ({"type": "mail", "id": "x", "domain": ""}, "SpecError", "domain is null or a non-empty string"),
    ("mail x", "SpecError", "a cancellation is a JSON object, got str"),
]  # fmt: skip


def test_a_refused_cancellation_says_why_and_writes_nothing(served: LocalStack) -> None:
    status, answer = send(served, {"cancel": [entry for entry, _, _ in REFUSED]})
    assert status == 207
    assert answer["cancelCounts"] == {**NONE_COUNTED, "refused": len(REFUSED)}
    assert "jobs" not in answer and "enqueued" not in answer  # no jobs were sent: no answer for them
    for (entry, error_class, error), got in zip(REFUSED, answer["cancel"], strict=True):
        assert (got["status"], got["errorClass"]) == ("refused", error_class), (entry, got)
        assert error in got["error"], (entry, got)
    # an answer names the entry's type and id when it could read them
    assert {k: answer["cancel"][0][k] for k in ("index", "type", "id")} == {"index": 0, "type": "nope", "id": "x"}
    assert served.dynamodb.scan(TableName=served.declaration.table_name)["Items"] == []


def test_a_request_of_jobs_and_cancellations_is_answered_for_each(served: LocalStack) -> None:
    request = {
        "jobs": [job("mail", "j1"), {"type": "nope", "params": {}}],
        "cancel": [{"type": "mail", "id": "j1", "domain": "wiki"}, {"type": "plain", "id": "p"}],
    }
    status, answer = send(served, request)
    assert status == 207
    # the jobs answered as ever, the cancellations beside them
    assert (answer["enqueued"], answer["refused"], answer["failed"]) == (1, 1, 0)
    assert [(a["index"], a["status"]) for a in answer["jobs"]] == [(0, "enqueued"), (1, "refused")]
    assert answer["cancelCounts"] == {**NONE_COUNTED, "cancelled": 1, "refused": 1}
    assert [(a["index"], a["status"]) for a in answer["cancel"]] == [(0, "cancelled"), (1, "refused")]
    # the jobs are sent first, then the cancellations recorded: j1 is covered
    served.drain()
    assert outcomes(served) == {("wiki", "j1"): Outcome.CANCELLED}
    # every job enqueued and every cancellation recorded: 200
    status, answer = send(served, {"jobs": [job("mail", "j2")], "cancel": [{"type": "report", "id": "r"}]})
    assert (status, answer["enqueued"], answer["cancelCounts"]["cancelled"]) == (200, 1, 1)
    # not a request: 400; too many jobs and cancellations together: 413, and nothing is sent
    for bad in (
        {"cancel": []},
        {"jobs": [], "cancel": []},
        {"cancel": {}},
        {"jobs": {}, "cancel": [{}]},
        {"jobs": [job("mail", "never")], "cancel": None},
        {"jobs": [job("mail", "never")], "batches": None},
    ):
        status, answer = send(served, bad)
        assert status == 400 and '"cancel": [...]' in answer["error"], bad
    half = MAX_JOBS // 2 + 1
    crowded = {"jobs": [job("mail", f"n{n}") for n in range(half)], "cancel": [{"type": "mail", "id": "x"}] * half}
    assert send(served, crowded)[0] == 413
    served.drain()
    assert {job_id for _, job_id in outcomes(served)} == {"j1", "j2"}


def test_a_cancellation_the_table_cannot_record_is_failed_and_may_be_sent_again(served: LocalStack) -> None:
    served.dynamodb.delete_table(TableName=served.declaration.table_name)
    status, answer = send(served, {"cancel": [{"type": "report", "id": "r"}, {"type": "mail", "all": True}]})
    assert status == 207 and answer["cancelCounts"] == {**NONE_COUNTED, "failed": 2}
    assert {(a["status"], a["errorClass"]) for a in answer["cancel"]} == {("failed", "TableUnavailable")}
    # nor can a status be read: 503, ask again
    assert status_of(served, "type=report&id=r")[0] == 503
    # once the table answers again, the same request is recorded
    provision_table(served.dynamodb, served.declaration)
    status, answer = send(served, {"cancel": [{"type": "report", "id": "r"}, {"type": "mail", "all": True}]})
    assert status == 200 and answer["cancelCounts"] == {**NONE_COUNTED, "cancelled": 2}


def test_get_answers_a_tracked_jobs_status_in_its_domain(served: LocalStack) -> None:
    query = "type=report&id=r&domain=wiki"
    status, answer = status_of(served, query)
    assert status == 404 and answer["error"].startswith("nothing is known of report r in domain 'wiki' yet")
    assert send(served, {"jobs": [job("report", "r"), job("report", "c")]})[0] == 200
    assert send(served, {"cancel": [{"type": "report", "id": "c", "domain": "wiki"}]})[0] == 200
    served.drain()
    status, answer = status_of(served, query)
    assert status == 200, answer
    assert {k: answer["status"][k] for k in ("job_id", "type", "domain", "state", "final", "attempt")} == {
        "job_id": "r", "type": "report", "domain": "wiki", "state": "succeeded", "final": True, "attempt": 1,
    }  # fmt: skip
    assert answer == {"status": served.queue_group("wiki").status("report", "r").to_json()}  # type: ignore[union-attr]
    # a cancelled job's status says so, and who cancelled it
    status, answer = status_of(served, "type=report&id=c&domain=wiki")
    assert (answer["status"]["state"], answer["status"]["cancelled_by"]) == ("cancelled", "push endpoint")
    # a job of that ID in another domain (or none) is another job: not readable from here; nor an unknown ID
    for other in ("type=report&id=r", "type=report&id=r&domain=other", "type=report&id=unknown&domain=wiki"):
        assert status_of(served, other)[0] == 404, other
    # what the endpoint cannot answer: 400, saying why
    for bad, error in [
        ("type=mail&id=m", "mail: jobkit keeps no status of its jobs: declare track_status = true"),
        ("type=internal&id=r", "unknown job type 'internal': the push endpoint does not take it"),
        ("type=nope&id=r", "unknown job type 'nope'"),
        ("type=report&id=a%23b", "id must match"),
        ("type=report", "a GET reads one job's status: ?type=T&id=ID"),
        ("", "a GET reads one job's status: ?type=T&id=ID"),
        ("type=report&id=r&job=r", "unknown parameter 'job'"),
        ("type=report&id=r&id=c", "id is given twice"),
        ("type=report&id=r&domain=", "domain is null or a non-empty string"),
    ]:
        status, answer = status_of(served, bad)
        assert status == 400 and error in answer["error"], (bad, answer)
    # unsigned, as any request to an IAM function URL: refused before the endpoint
    assert get(f"{served.endpoint_url}{PATH}?{query}")[0] == 403


@pytest.fixture
def hmac_served(jobs_toml: Path, clock: VirtualClock) -> Iterator[LocalStack]:
    declaration = load_declaration(jobs_toml)
    options = EndpointOptions(("report", "mail"), "hmac", "test/jobkit-push")
    with (
        fresh_aws(),
        LocalStack(replace(declaration, push_endpoint=options), clock=clock, seed=3, server=True) as stack,
    ):
        yield stack


def test_with_hmac_auth_a_get_is_signed_over_its_raw_query_string(hmac_served: LocalStack) -> None:
    url, now = f"{hmac_served.endpoint_url}{PATH}", hmac_served.clock.now()
    body = json.dumps({"jobs": [job("report", "r")]}).encode()
    assert post(url, body, {"x-jobkit-signature": sign(LOCAL_HMAC_KEY, body, now)})[0] == 200
    hmac_served.drain()
    query = "type=report&id=r&domain=%77iki"  # the domain percent-encoded: "wiki"

    def signature(signed_bytes: bytes, key: bytes = LOCAL_HMAC_KEY, at: float = now) -> dict[str, str]:
        return {"x-jobkit-signature": sign(key, signed_bytes, at)}

    # unsigned, signed over another query, over the decoded query, over an empty body,
    # with another key, or too long ago: 401
    refused = [
        {},
        signature(b"type=report&id=other&domain=wiki"),
        signature(b"type=report&id=r&domain=wiki"),
        signature(b""),
        signature(query.encode(), key=b"another-key-of-32-bytes-........"),
        signature(query.encode(), at=now - 301),
    ]
    for headers in refused:
        status, answer = get(f"{url}?{query}", headers)
        assert status == 401, (headers, answer)
    assert get(f"{url}?{query}", signature(b"type=report&id=other"))[1] == {
        "error": "the signature does not match the query string"
    }
    assert "sign the query string" in get(f"{url}?{query}")[1]["error"]
    # signed over the query string exactly as sent: answered
    status, answer = get(f"{url}?{query}", signature(query.encode()))
    assert status == 200 and (answer["status"]["job_id"], answer["status"]["state"]) == ("r", "succeeded")
    # a cancellation is signed over its body, as jobs are
    body = json.dumps({"cancel": [{"type": "mail", "id": "m"}]}).encode()
    assert post(url, body, {"x-jobkit-signature": sign(LOCAL_HMAC_KEY, b"{}", now)})[0] == 401
    status, answer = post(url, body, {"x-jobkit-signature": sign(LOCAL_HMAC_KEY, body, now)})
    assert status == 200 and answer["cancel"][0]["status"] == "cancelled"


def test_the_lambda_function_reads_the_query_string_and_names_the_iam_caller(
    jobs_toml: Path, clock: VirtualClock
) -> None:
    declaration = load_declaration(jobs_toml)
    variables = build(declaration)["Resources"]["PushEndpoint"]["Properties"]["Environment"]["Variables"]
    with LocalStack(declaration, clock=clock, seed=3) as local:
        urls = json.loads(variables["JOBKIT_QUEUE_URLS"]["Fn::Sub"].replace("${Prefix}", "epcancel"))
        environ = {"JOBKIT_DECLARATION": variables["JOBKIT_DECLARATION"], "JOBKIT_PREFIX": "epcancel",
                   "JOBKIT_QUEUE_URLS": json.dumps({name: local.queue_urls[name] for name in urls})}  # fmt: skip
        endpoint = endpoint_from_environment(environ, clock=clock)
        context = {"http": {"method": "POST"}, "authorizer": {"iam": {"userArn": ARN, "accountId": "123456789012"}}}
        request = {"jobs": [job("report", "r")], "cancel": [{"type": "report", "id": "r", "domain": "wiki"}]}
        event = {"requestContext": context, "headers": {}, "body": json.dumps(request), "isBase64Encoded": False}
        response = handle_event(endpoint, event)
        assert response["statusCode"] == 200, response
        local.drain()
        assert reason_of(local, "r").startswith(f"cancelled by push endpoint ({ARN}) at ")
        get_event = {"requestContext": {"http": {"method": "GET"}}, "rawQueryString": "type=report&id=r&domain=wiki"}
        response = handle_event(endpoint, get_event)
        assert response["statusCode"] == 200, response
        status = json.loads(response["body"])["status"]
        assert (status["state"], status["cancelled_by"]) == ("cancelled", f"push endpoint ({ARN})")
        assert handle_event(endpoint, {**get_event, "rawQueryString": "type=report&id=r"})["statusCode"] == 404
        assert handle_event(endpoint, {"requestContext": {"http": {"method": "PUT"}}})["statusCode"] == 405


def test_the_endpoint_role_allows_every_table_request_its_cancellations_and_status_reads_make(
    served: LocalStack,
) -> None:
    sent = [job("report", "r"), job("once", "o"), job("mail", "m")]
    assert send(served, {"jobs": sent})[0] == 200
    served.drain()  # a status record for r, a delivery claim for o
    touched: list[tuple[str, str]] = []

    def remember(params: dict[str, Any], model: Any, **_: Any) -> None:
        item = params.get("Key") or params.get("Item") or {}
        value = item.get("pk") or params.get("ExpressionAttributeValues", {}).get(":pk")
        touched.append((model.name, value["S"]))

    served.dynamodb.meta.events.register("provide-client-params.dynamodb.*", remember)
    cancel = [{"type": t, "id": i, "domain": "wiki"} for t, i in (("report", "r"), ("once", "o"), ("mail", "m"))]
    status, answer = send(served, {"cancel": [*cancel, {"type": "mail", "all": True, "domain": "wiki"}]})
    assert status == 200 and [a["status"] for a in answer["cancel"]] == ["ended", "ended", "cancelled", "cancelled"]
    assert status_of(served, "type=report&id=r&domain=wiki")[0] == 200
    kinds = {pk.split("#")[1] for _, pk in touched}
    assert kinds == {"cancel", "status", "once"}, touched
    template = translate(build(served.declaration), parameters={"Prefix": "epcancel"})
    role = template["Resources"]["PushEndpointRole"]["Properties"]
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    for operation, key in touched:
        assert any(
            f"dynamodb:{operation}" in s["Action"]
            and any(string_like(p, key) for p in s["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])
            for s in statements
            if "Condition" in s
        ), (operation, key)
