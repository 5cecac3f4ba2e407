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
    :data:`KEY_TTL_S`, so a rotated key is taken up)
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobkit.endpoint.service import PushEndpoint

KEY_TTL_S = 300.0


class SecretKey:
    """The HMAC key, from Secrets Manager, re-read every :data:`KEY_TTL_S` seconds."""

    def __init__(self, client: Any, secret_id: str) -> None:
        self._client = client
        self._secret_id = secret_id
        self._key: bytes | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        from jobkit.endpoint.signature import KeyUnusable, usable_key

        with self._lock:
            if self._key is None or time.monotonic() - self._read_at > KEY_TTL_S:
                try:
                    value = self._client.get_secret_value(SecretId=self._secret_id).get("SecretString")
                except Exception as exc:  # botocore's errors: no access, no such secret, throttled
                    raise KeyUnusable(f"cannot read the secret {self._secret_id}: {exc}") from None
                if not isinstance(value, str):
                    raise KeyUnusable(f"the secret {self._secret_id} has no SecretString (a binary secret?)")
                self._key, self._read_at = usable_key(value.encode("utf-8")), time.monotonic()
            return self._key


def endpoint_from_environment(environ: Mapping[str, str]) -> PushEndpoint:
    """The endpoint, as its Lambda container builds it (once)."""
    from jobkit.endpoint.service import PushEndpoint
    from jobkit.wiring import Wiring

    wiring = Wiring.from_environment(environ)
    secret = environ.get("JOBKIT_ENDPOINT_HMAC_SECRET")
    key = SecretKey(wiring.clients.client("secretsmanager"), secret) if secret else None
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
    response = endpoint.handle(str(http.get("method", "")), headers, body)
    return {"statusCode": response.status, "headers": response.headers, "body": response.text()}
