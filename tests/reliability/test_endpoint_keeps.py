"""What the HTTP push endpoint keeps: its producers' key through a Secrets
Manager outage (a key it has read serves for a bounded time).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from jobkit.clock import VirtualClock
from jobkit.config import Declaration
from jobkit.endpoint.lambda_handler import endpoint_from_environment, handle_event
from jobkit.endpoint.options import EndpointOptions
from jobkit.endpoint.secret_key import KEY_TTL_S, MAX_KEY_AGE_S, REFRESH_RETRY_S
from jobkit.endpoint.service import PushEndpoint
from jobkit.endpoint.signature import sign
from jobkit.local import LocalStack
from jobkit.template import build
from jobkit.wiring import AwsClients

from faults import FailCalls

SECRET_NAME = "myapp/jobkit-push"
KEY, ROTATED = "k" * 32, "r" * 32


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
