"""What the HTTP push endpoint keeps: a newer producer's fields on the way to
the queue (the wire format's forward compatibility), and its producers' key
through a Secrets Manager outage (a key it has read serves for a bounded time).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from http_push import jobs, post, signed

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobQueueError, SpecError
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import Declaration
from jobkit.endpoint.lambda_handler import endpoint_from_environment, handle_event
from jobkit.endpoint.options import EndpointOptions
from jobkit.endpoint.secret_key import KEY_TTL_S, MAX_KEY_AGE_S, REFRESH_RETRY_S
from jobkit.endpoint.service import PushEndpoint
from jobkit.endpoint.signature import sign
from jobkit.local import LocalStack
from jobkit.local.push_route import PATH
from jobkit.sqs import MAX_JOB_BYTES
from jobkit.template import build
from jobkit.wiring import AwsClients

from conftest import START
from faults import FailCalls
from testjobs import RUNS

SECRET_NAME = "myapp/jobkit-push"
KEY, ROTATED = "k" * 32, "r" * 32
#: Fields a newer producer may send: a top-level field this jobkit does not know
#: (its value an object of its own fields), and a param no schema names.
NEWER = {"traceId": "4bf92f3577b34da6", "producerHints": {"priority": "low", "tags": ["a", "b"], "nested": {"x": 1}}}


# -- a newer producer's fields ------------------------------------------------------------------


@pytest.fixture
def served(test_declaration: Declaration, clock: VirtualClock) -> Iterator[LocalStack]:
    with LocalStack(test_declaration, clock=clock, seed=1, server=True) as local:
        RUNS.clear()
        yield local


def queued_bodies(local: LocalStack, queue: str) -> list[dict[str, Any]]:
    """The bodies waiting in a queue, left there (visible again at once) for the runner."""
    url = local.queue_urls[f"test-{queue}"]
    messages = local.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def test_a_newer_producers_fields_reach_the_queue_through_the_push_route_and_the_job_runs(served: LocalStack) -> None:
    url = f"{served.endpoint_url}{PATH}"
    job = {"type": "noop", "id": "newer-1", "domain": "enwiki", "params": {"n": 1, "newParam": [1, {"y": 2}]}, **NEWER}
    body = jobs(job)
    status, answer = post(url, body, signed(url, body))
    assert (status, answer["enqueued"]) == (200, 1), answer
    [sent] = queued_bodies(served, "noop")
    # kept as sent, beside the fields the endpoint filled in
    assert {k: sent[k] for k in (*NEWER, "params", "id", "domain")} == {
        k: job[k] for k in (*NEWER, "params", "id", "domain")
    }
    assert sent["v"] == 1 and sent["enqueuedAt"] == served.clock.now()
    served.drain()
    assert [(r.job_id, r.outcome) for r in served.results.results] == [("newer-1", Outcome.SUCCEEDED)]


def test_kept_fields_count_toward_the_message_size_limit(stack: LocalStack) -> None:
    # small params, and a field that alone takes the message over what a job may have
    big = {"type": "noop", "id": "too-big", "params": {"n": 1}, "attachment": "x" * MAX_JOB_BYTES}
    response = stack.push_endpoint.handle("POST", {}, jobs(big, {"type": "noop", "id": "small", "params": {}, **NEWER}))
    assert response.status == 207
    refused, enqueued = response.body["jobs"]
    assert (refused["status"], refused["errorClass"]) == ("refused", "SpecError")
    assert f"over the {MAX_JOB_BYTES} a job may have" in refused["error"]
    assert enqueued["status"] == "enqueued"
    assert [b["id"] for b in queued_bodies(stack, "noop")] == ["small"]


def test_kept_fields_get_past_none_of_the_endpoints_checks(stack: LocalStack) -> None:
    now = stack.clock.now()
    refused = [
        {"type": "typed", "params": {"title": "Paris", "pages": [1], "extra": 1}},  # the schema is closed
        {"type": "typed", "params": {"title": "Paris"}},  # nor does a field make up for a missing param
        {"type": "leaf", "params": {"rootJobSignature": "a" * 40}},  # a root without its timestamp
        {"type": "leaf", "params": new_root_job_params("leaf:x", now + 3600)},  # from the future
        {"type": "noop", "params": {}, "enqueuedAt": now + 3600},
        {"type": "noop", "params": {}, "releaseAt": now + 400 * 86400},
        {"type": "noop", "params": {}, "priorAttempts": 0},  # the runner's field
        {"type": "alwaysFails", "params": {}},  # not a type the endpoint takes
        {"type": "noop", "params": {}, "v": 2},
    ]
    response = stack.push_endpoint.handle("POST", {}, jobs(*({**job, **NEWER} for job in refused)))
    assert [a["status"] for a in response.body["jobs"]] == ["refused"] * len(refused), response.body
    # a field name that is not an identifier is no field of a newer producer: refused, naming it
    response = stack.push_endpoint.handle("POST", {}, jobs({"type": "noop", "params": {}, "trace-id": "x"}))
    [answer] = response.body["jobs"]
    assert answer["status"] == "refused" and "not identifiers: 'trace-id'" in answer["error"]
    assert queued_bodies(stack, "noop") == queued_bodies(stack, "typed") == queued_bodies(stack, "leaf") == []


def test_a_kept_field_cannot_be_one_jobkit_owns(stack: LocalStack) -> None:
    # a job that names a field twice is ambiguous, not a kept field: the request is refused whole
    twice = b'{"jobs": [{"type": "noop", "params": {}, "id": "mine", "traceId": "t", "id": "theirs"}]}'
    response = stack.push_endpoint.handle("POST", {}, twice)
    assert response.status == 400 and "the key 'id' twice in one object" in response.body["error"]
    # jobkit's own fields are read as such, never kept as a newer producer's: the
    # runner's priorAttempts is not written back into a body it reads
    spec = JobSpecification.from_message(
        json.dumps({"v": 1, "id": "j", "type": "noop", "params": {}, "enqueuedAt": START, "priorAttempts": 4, **NEWER})
    )
    assert json.loads(spec.to_message()) == {
        "v": 1, "id": "j", "type": "noop", "domain": None, "params": {}, "enqueuedAt": START,
        "releaseAt": None, "removeDuplicates": False, **NEWER,
    }  # fmt: skip
    # and no kept field may stand for one (a second id, a v, the runner's count), nor be a name a body cannot have
    for name in ("id", "v", "type", "params", "enqueuedAt", "priorAttempts", "trace-id", "jobkit.reason", ""):
        with pytest.raises(SpecError, match="extra field"):
            JobSpecification("noop", {}, extra_fields={name: "forged"})
    forged = JobSpecification("noop", {}, extra_fields={"traceId": "t"})
    forged.extra_fields["id"] = "forged"  # changed after it was made: refused when written, not sent
    with pytest.raises(JobQueueError) as refused:
        stack.queue_group().push(forged)
    [failed] = refused.value.failed
    assert (failed.code, failed.message) == ("SpecError", f"noop {forged.id}: extra field 'id' is jobkit's own field: "
                                             "a kept field is one jobkit does not know")  # fmt: skip
    assert queued_bodies(stack, "noop") == []


# -- the producers' key through a Secrets Manager outage ----------------------------------------


class HmacEndpoint:
    """The deployed function of an ``auth = "hmac"`` endpoint, as its environment
    builds it, reading its key from moto's Secrets Manager on a virtual clock."""

    def __init__(self, local: LocalStack, clock: VirtualClock, environ: dict[str, str]) -> None:
        self.clock = clock
        self.secrets = local.client("secretsmanager")
        clients = AwsClients(clients={"secretsmanager": self.secrets})
        self.endpoint: PushEndpoint = endpoint_from_environment(environ, clock=clock, clients=clients)

    def outage(self) -> FailCalls:
        """Secrets Manager answers every GetSecretValue with a server error (after the SDK's retries)."""
        return FailCalls(self.secrets, "secretsmanager.GetSecretValue", code="InternalServiceError", status=500)

    def push(self, key: str) -> tuple[int, dict[str, Any]]:
        """One request signed with ``key``, as a function URL event."""
        body = json.dumps({"jobs": [{"type": "refreshLinks", "params": {"title": "Paris"}}]})
        event = {
            "requestContext": {"http": {"method": "POST"}},
            "headers": {
                "Content-Type": "application/json",
                "X-Jobkit-Signature": sign(key.encode(), body.encode(), self.clock.now()),
            },
            "body": body,
            "isBase64Encoded": False,
        }
        response = handle_event(self.endpoint, event)
        return response["statusCode"], json.loads(response["body"])


@pytest.fixture
def hmac_endpoint(example_declaration: Declaration, clock: VirtualClock) -> Iterator[HmacEndpoint]:
    declaration = replace(example_declaration, push_endpoint=EndpointOptions(("refreshLinks",), "hmac", SECRET_NAME))
    variables = build(declaration)["Resources"]["PushEndpoint"]["Properties"]["Environment"]["Variables"]
    environ = {name: variables[name] for name in ("JOBKIT_DECLARATION", "JOBKIT_ENDPOINT_HMAC_SECRET")}
    with LocalStack(declaration, clock=clock) as local:
        local.client("secretsmanager").create_secret(Name=SECRET_NAME, SecretString=KEY)
        yield HmacEndpoint(local, clock, {**environ, "JOBKIT_PREFIX": "jobkit"})


def test_while_the_secret_cannot_be_read_the_cached_key_serves_until_its_maximum_age(
    hmac_endpoint: HmacEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    clock = hmac_endpoint.clock
    assert hmac_endpoint.push(KEY)[0] == 200
    read_at = clock.now()
    outage = hmac_endpoint.outage()
    clock.advance(KEY_TTL_S + 1)
    with caplog.at_level(logging.WARNING, logger="jobkit"):
        assert hmac_endpoint.push(KEY)[0] == 200
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert SECRET_NAME in warning.getMessage() and "cached key" in warning.getMessage()
    assert outage.failed_calls == 1
    # the outage is not asked again on every request: requests every 10 s for the key's whole life
    requests = 0
    while clock.now() + 10 - read_at <= MAX_KEY_AGE_S:
        clock.advance(10)
        status, answer = hmac_endpoint.push(KEY)
        assert status == 200, answer
        requests += 1
    assert requests > 300 and 2 <= outage.failed_calls <= 1 + MAX_KEY_AGE_S / REFRESH_RETRY_S / 4
    # past its maximum age, a key that could not be checked against its secret is not used
    clock.advance(11)
    with caplog.at_level(logging.ERROR, logger="jobkit"):
        status, answer = hmac_endpoint.push(KEY)
    assert status == 503 and f"cannot read the secret {SECRET_NAME}" in answer["error"], answer
    # once the secret reads again, the endpoint takes requests again
    outage.remove()
    clock.advance(KEY_TTL_S)
    assert hmac_endpoint.push(KEY)[0] == 200


def test_a_key_never_read_is_503_and_a_rotated_key_is_taken_up_once_the_secret_reads_again(
    hmac_endpoint: HmacEndpoint,
) -> None:
    clock = hmac_endpoint.clock
    outage = hmac_endpoint.outage()
    status, answer = hmac_endpoint.push(KEY)
    assert status == 503 and f"cannot read the secret {SECRET_NAME}" in answer["error"]
    outage.remove()
    assert hmac_endpoint.push(KEY)[0] == 200  # read at the next request: no key to wait with
    # the key is rotated during an outage: the cached one serves, the new one is not known yet
    outage = hmac_endpoint.outage()
    hmac_endpoint.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString=ROTATED)
    clock.advance(KEY_TTL_S + 1)
    assert hmac_endpoint.push(KEY)[0] == 200
    assert hmac_endpoint.push(ROTATED)[0] == 401
    # the secret reads again: within the backoff, the rotated key is taken up and the old one refused
    outage.remove()
    clock.advance(KEY_TTL_S)
    assert hmac_endpoint.push(ROTATED)[0] == 200
    assert hmac_endpoint.push(KEY)[0] == 401


def test_a_secret_that_reads_but_holds_no_usable_key_ends_the_cached_one(hmac_endpoint: HmacEndpoint) -> None:
    # Not an outage: the secret says what the key is, and it now says no key (emptied, say, to stop producers)
    assert hmac_endpoint.push(KEY)[0] == 200
    hmac_endpoint.secrets.put_secret_value(SecretId=SECRET_NAME, SecretString="short")
    hmac_endpoint.clock.advance(KEY_TTL_S + 1)
    status, answer = hmac_endpoint.push(KEY)
    assert status == 503 and answer["error"].endswith("the producers' key is 5 bytes; it must be at least 16")
