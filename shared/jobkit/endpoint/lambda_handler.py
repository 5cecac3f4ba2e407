"""The push endpoint's Lambda function: a function URL event in, an HTTP answer out.

``Handler: index.handler`` with the inline code ``from jobkit.endpoint.lambda_handler
import handler``: the function has no code of its own, only the jobkit layer.
It is wired from its environment on the first request, as a runner is:

``JOBKIT_DECLARATION``
    the types it takes, with their schemas
``JOBKIT_PREFIX``, ``JOBKIT_QUEUE_URLS``
    the stack's name prefix, and the URLs of the queues it sends to
``JOBKIT_ENDPOINT_HMAC_SECRET``
    with ``auth = "hmac"``: the Secrets Manager secret whose ``SecretString`` is
    the producers' key (read on the first request, and again after
    :data:`~jobkit.endpoint.secret_key.KEY_TTL_S`, so a rotated key is taken up)
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobkit.core.clock import Clock
    from jobkit.endpoint.service import PushEndpoint
    from jobkit.wiring import AwsClients


def endpoint_from_environment(
    environ: Mapping[str, str], *, clock: Clock | None = None, clients: AwsClients | None = None
) -> PushEndpoint:
    """The endpoint, as its Lambda container builds it (once).

    Args:
        environ: the function's environment.
        clock: the time source (default: the system's); tests move a virtual one.
        clients: where AWS is (default: boto3's own chain).
    """
    from jobkit.endpoint.secret_key import SecretKey
    from jobkit.endpoint.service import PushEndpoint
    from jobkit.wiring import Wiring

    configured = Wiring.from_environment(environ)
    wiring = Wiring(
        configured.declaration,
        clients=clients,
        clock=clock,
        queue_urls=configured.queue_urls,
        payload_bucket=configured.payload_bucket,
    )
    secret = environ.get("JOBKIT_ENDPOINT_HMAC_SECRET")
    key = SecretKey(wiring.clients.client("secretsmanager"), secret, wiring.clock) if secret else None
    return PushEndpoint(wiring.declaration, wiring.group, wiring.clock, key)


@cache
def _endpoint() -> PushEndpoint:
    return endpoint_from_environment(os.environ)


def handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """The function's entry."""
    return handle_event(_endpoint(), event)


def handle_event(endpoint: PushEndpoint, event: Mapping[str, Any]) -> dict[str, Any]:
    """A Lambda function URL's request (payload format 2.0) in, its response out."""
    http = (event.get("requestContext") or {}).get("http") or {}
    raw = event.get("body") or ""
    try:
        body = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else raw.encode("utf-8")
    except ValueError:
        body = b"\xff"  # not JSON: the endpoint answers 400
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    query = str(event.get("rawQueryString") or "")  # as sent: what a GET's HMAC signature covers
    # with IAM auth, the caller's principal: who cancelled
    iam = ((event.get("requestContext") or {}).get("authorizer") or {}).get("iam") or {}
    principal = iam.get("userArn") if isinstance(iam, Mapping) else None
    response = endpoint.handle(str(http.get("method", "")), headers, body, query, str(principal) if principal else None)
    return {"statusCode": response.status, "headers": response.headers, "body": response.text()}
