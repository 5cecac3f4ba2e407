"""The HTTP push endpoint: job specs as JSON over HTTP, checked as the runner
checks them, sent in batches of 10 with their roots recorded, and an answer
per job. On the local stack, served on a port as `jobkit local up` serves it
(SigV4 checked as a function URL with IAM auth checks it), and through the
Lambda handler built from the environment the template gives the function.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import replace

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from http_push import jobs, post, signed

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration
from jobkit.endpoint.lambda_handler import endpoint_from_environment, handle_event
from jobkit.endpoint.options import EndpointOptions
from jobkit.endpoint.service import MAX_JOBS
from jobkit.endpoint.signature import sign
from jobkit.local import LocalStack
from jobkit.local.push_route import LOCAL_HMAC_KEY, PATH
from jobkit.template import build

from conftest import RequestCounter
from faults import FailCalls
from testjobs import RUNS

TYPED = {"title": "Paris", "pages": [1, 2]}


@pytest.fixture
def served(test_declaration: Declaration, clock: VirtualClock) -> Iterator[LocalStack]:
    with LocalStack(test_declaration, clock=clock, seed=1, server=True) as local:
        RUNS.clear()
        yield local


def test_an_unsigned_or_badly_signed_request_is_refused_and_a_signed_one_runs(served: LocalStack) -> None:
    url = f"{served.endpoint_url}{PATH}"
    body = jobs({"type": "typed", "params": TYPED, "id": "http-1"})
    # Unsigned, signed with another secret, for another service or another region (AWS
    # refuses a signature scoped to a region other than the function URL's): refused
    wrong = (
        signed(url, body, secret="not-it"),
        signed(url, body, service="sqs"),
        signed(url, body, region="eu-west-1"),
    )
    for headers in ({}, *wrong):
        status, answer = post(url, body, {"content-type": "application/json", **headers})
        assert status == 403 and answer["error"].startswith("Forbidden"), answer
    assert "region 'eu-west-1'" in post(url, body, wrong[2])[1]["error"]
    # a signature for another body does not carry over
    status, _ = post(url, jobs({"type": "noop", "params": {}}), signed(url, body))
    assert status == 403
    assert (
        served.sqs.get_queue_attributes(
            QueueUrl=served.queue_urls["test-typed"], AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
        == "0"
    )
    # Signed with the local credentials: enqueued, answered per job, and run
    status, answer = post(url, body, signed(url, body))
    assert (status, answer) == (
        200,
        {
            "enqueued": 1,
            "refused": 0,
            "failed": 0,
            "jobs": [{"index": 0, "id": "http-1", "type": "typed", "status": "enqueued"}],
        },
    )
    served.drain()
    assert [(r.job_id, r.outcome) for r in served.results.results] == [("http-1", Outcome.SUCCEEDED)]


def test_each_job_is_checked_as_the_runner_would_and_answered_in_order(stack: LocalStack) -> None:
    good = {"type": "typed", "params": TYPED}
    response = stack.push_endpoint.handle(
        "POST",
        {},
        jobs(
            good,
            {"type": "typed", "params": {"title": "Lyon"}},  # its schema wants pages
            {"type": "alwaysFails", "params": {}},  # declared, but not a type the endpoint takes
            {"type": "nope", "params": {}},
            "a string",
            {"type": "noop", "params": {}, "v": 4},
            {"type": "noop", "params": {}, "id": "twice"},
            {"type": "noop", "params": {}, "id": "twice"},
            {"type": "noop", "params": {}, "enqueuedAt": stack.clock.now() + 3600},
            {"type": "leaf", "params": {"rootJobSignature": "a" * 40}},  # without its timestamp
        ),
    )
    assert response.status == 207
    answers = response.body["jobs"]
    assert [a["index"] for a in answers] == list(range(10))
    assert [a["status"] for a in answers] == ["enqueued", "refused", "refused", "refused", "refused", "refused",
                                              "enqueued", "refused", "refused", "refused"]  # fmt: skip
    assert answers[1]["errorClass"] == "InvalidParams" and answers[1]["error"].endswith(
        "params must contain ['pages'] properties"
    )
    assert "the push endpoint does not take it (it takes leaf, noop, typed)" in answers[2]["error"]
    assert answers[3]["errorClass"] == "UnknownJobType"
    assert answers[4]["error"] == "a job is a JSON object, got str"
    assert "wire version 4 is newer" in answers[5]["error"]
    assert answers[7]["error"] == "id 'twice' is also job 6 of this request"
    assert "ahead" in answers[8]["error"]
    assert (response.body["enqueued"], response.body["refused"], response.body["failed"]) == (2, 8, 0)
    stack.drain()
    assert sorted(r.job_id for r in stack.results.results) == sorted([answers[0]["id"], "twice"])
    assert stack.dead_letters("typed") == []  # nothing refused was sent


def test_a_request_that_is_not_jobs_is_a_clear_400(stack: LocalStack) -> None:
    endpoint = stack.push_endpoint
    assert endpoint.handle("POST", {}, b"{not json").status == 400
    assert endpoint.handle("POST", {}, b'{"jobs": []}').body == {
        "error": 'the request must be a JSON object {"jobs": [...]} with at least one job'
    }
    assert endpoint.handle("POST", {}, b'{"jobs": 1, "jobs": 2}').status == 400  # a key twice
    assert endpoint.handle("PUT", {}, b"").status == 405
    assert endpoint.handle("GET", {}, b"").status == 400  # a GET names a job (test_endpoint_cancel.py)
    too_many = jobs(*[{"type": "noop", "params": {}}] * (MAX_JOBS + 1))
    assert endpoint.handle("POST", {}, too_many).status == 413


def test_jobs_go_in_batches_of_ten(stack: LocalStack, sqs_requests: RequestCounter) -> None:
    sqs_requests.reset()
    response = stack.push_endpoint.handle("POST", {}, jobs(*[{"type": "noop", "params": {"n": n}} for n in range(25)]))
    assert response.status == 200 and response.body["enqueued"] == 25
    assert sqs_requests.calls.get("SendMessageBatch") == 3


def test_a_root_pushed_through_the_endpoint_is_recorded_and_supersedes_older_leaves(stack: LocalStack) -> None:
    key = "leaf:Template:Infobox"
    old = {k: v for k, v in new_root_job_params(key, stack.clock.now() - 60).items() if k != "rootJobIsSelf"}
    stale = [JobSpecification("leaf", {"n": n, **old}) for n in range(3)]
    stack.queue_group().push(stale)
    root = {"type": "leaf", "params": {"n": "root", **new_root_job_params(key, stack.clock.now())}}
    assert stack.push_endpoint.handle("POST", {}, jobs(root)).status == 200
    stack.drain()
    outcomes = {r.job_id: r.outcome for r in stack.results.results}
    assert {outcomes[s.id] for s in stale} == {Outcome.SUPERSEDED}


def test_what_sqs_does_not_take_is_failed_and_may_be_sent_again(stack: LocalStack) -> None:
    outage = FailCalls(stack.sqs, "sqs.SendMessageBatch", code="AWS.SimpleQueueService.NonExistentQueue")
    response = stack.push_endpoint.handle("POST", {}, jobs({"type": "noop", "params": {}, "id": "again"}))
    outage.remove()
    assert response.status == 207
    [answer] = response.body["jobs"]
    assert (answer["status"], answer["errorClass"]) == ("failed", "AWS.SimpleQueueService.NonExistentQueue")
    assert stack.push_endpoint.handle("POST", {}, jobs({"type": "noop", "params": {}, "id": "again"})).status == 200


def test_with_hmac_auth_a_request_needs_the_producer_signature(
    test_declaration: Declaration, clock: VirtualClock
) -> None:
    options = EndpointOptions(("noop",), "hmac", "test/jobkit-push")
    with LocalStack(replace(test_declaration, push_endpoint=options), clock=clock) as local:
        endpoint, body = local.push_endpoint, jobs({"type": "noop", "params": {}})
        assert endpoint.handle("POST", {}, body).status == 401
        stale = sign(LOCAL_HMAC_KEY, body, clock.now() - 301)
        assert endpoint.handle("POST", {"x-jobkit-signature": stale}, body).status == 401
        other = sign(LOCAL_HMAC_KEY, b'{"jobs": []}', clock.now())
        assert endpoint.handle("POST", {"x-jobkit-signature": other}, body).status == 401
        good = sign(LOCAL_HMAC_KEY, body, clock.now())
        assert endpoint.handle("POST", {"x-jobkit-signature": good}, body).status == 200


def test_the_lambda_function_works_from_the_environment_the_template_gives_it(
    example_declaration: Declaration,
) -> None:
    template = build(example_declaration)
    variables = template["Resources"]["PushEndpoint"]["Properties"]["Environment"]["Variables"]
    with LocalStack(example_declaration) as local:
        urls = json.loads(variables["JOBKIT_QUEUE_URLS"]["Fn::Sub"].replace("${Prefix}", "jobkit"))
        queue_urls = {name: local.queue_urls[name] for name in urls}
        environ = {"JOBKIT_DECLARATION": variables["JOBKIT_DECLARATION"], "JOBKIT_PREFIX": "jobkit",
                   "JOBKIT_QUEUE_URLS": json.dumps(queue_urls)}  # fmt: skip
        endpoint = endpoint_from_environment(environ)
        event = {
            "requestContext": {"http": {"method": "POST"}},
            "headers": {"Content-Type": "application/json", "X-Request-ID": "req-http-1"},
            "body": json.dumps({"jobs": [{"type": "refreshLinks", "params": {"title": "Paris"}, "domain": "enwiki"}]}),
            "isBase64Encoded": False,
        }
        response = handle_event(endpoint, event)
        assert response["statusCode"] == 200, response
        [answer] = json.loads(response["body"])["jobs"]
        local.drain()
        [result] = local.results.results
        assert (result.job_id, result.outcome, result.correlation_id) == (answer["id"], Outcome.SUCCEEDED, "req-http-1")
        # a type the endpoint does not take is refused, though the stack declares it
        event["body"] = json.dumps({"jobs": [{"type": "enotifNotify", "params": {}}]})
        assert json.loads(handle_event(endpoint, event)["body"])["refused"] == 1


def test_a_signature_must_cover_the_body_as_sent(served: LocalStack) -> None:
    url = f"{served.endpoint_url}{PATH}"
    signed_body, sent_body = jobs({"type": "noop", "params": {}}), jobs({"type": "noop", "params": {"evil": 1}})
    headers = signed(url, signed_body)
    # a hash of the signed body claimed in an unsigned header does not make another body pass
    forged = {**headers, "x-amz-content-sha256": hashlib.sha256(signed_body).hexdigest()}
    assert post(url, sent_body, forged)[0] == 403
    # nor does an unsigned payload
    request = AWSRequest(method="POST", url=url, data=sent_body, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    SigV4Auth(Credentials("testing", "testing"), "lambda", "us-east-1").add_auth(request)
    assert post(url, sent_body, dict(request.headers.items()))[0] == 403
    # the path with a trailing slash is the endpoint too, signed as sent
    assert post(f"{url}/", signed_body, signed(f"{url}/", signed_body))[0] == 200


def test_a_producer_may_not_send_the_runners_fields(stack: LocalStack) -> None:
    response = stack.push_endpoint.handle("POST", {}, jobs({"type": "noop", "params": {}, "priorAttempts": 3}))
    [answer] = response.body["jobs"]
    assert (answer["status"], answer["error"]) == (
        "refused",
        "priorAttempts is the runner's to keep, not a producer's to send: leave it out",
    )


def test_an_hmac_endpoint_reads_its_key_from_its_secret_and_takes_no_request_with_an_unusable_one(
    example_declaration: Declaration,
) -> None:
    options = EndpointOptions(("refreshLinks",), "hmac", "myapp/jobkit-push")
    declaration = replace(example_declaration, push_endpoint=options)
    variables = build(declaration)["Resources"]["PushEndpoint"]["Properties"]["Environment"]["Variables"]
    with LocalStack(declaration) as local:
        secrets = local.client("secretsmanager")
        secrets.create_secret(Name="myapp/jobkit-push", SecretString="too-short")
        environ = {
            "JOBKIT_DECLARATION": variables["JOBKIT_DECLARATION"],
            "JOBKIT_PREFIX": "jobkit",
            "JOBKIT_ENDPOINT_HMAC_SECRET": variables["JOBKIT_ENDPOINT_HMAC_SECRET"],
        }
        endpoint = endpoint_from_environment(environ)
        body = jobs({"type": "refreshLinks", "params": {"title": "Paris"}})
        now = local.clock.now()
        # a key anyone could guess (an empty or short secret) signs nothing
        response = endpoint.handle("POST", {"x-jobkit-signature": sign(b"too-short", body, now)}, body)
        assert response.status == 503
        assert response.body["error"].endswith("the producers' key is 9 bytes; it must be at least 16")
        # once the secret holds a real key, it is read again and requests signed with it are taken
        key = "k" * 32
        secrets.put_secret_value(SecretId="myapp/jobkit-push", SecretString=key)
        assert endpoint.handle("POST", {"x-jobkit-signature": sign(b"x" * 32, body, now)}, body).status == 401
        assert endpoint.handle("POST", {"x-jobkit-signature": sign(key.encode(), body, now)}, body).status == 200
