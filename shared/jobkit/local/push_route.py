"""The push endpoint on the local stack: ``POST {endpoint}/jobkit/push`` (and ``GET`` for a
job's status) on `jobkit local up`'s port.

It runs the deployed endpoint's code (:class:`~jobkit.endpoint.service.PushEndpoint`)
and authenticates as its function URL does on AWS:

- ``auth = "iam"``: the request must be signed with SigV4 for the service
  ``lambda``, with the local stack's credentials (the ones `jobkit local up`
  prints, ``testing``/``testing``), within 15 minutes of the wall clock, as
  AWS checks it; anything else is refused with 403 before the endpoint sees
  it. ``curl --aws-sigv4 "aws:amz:us-east-1:lambda" --user testing:testing``
  signs so, as does any AWS SDK's SigV4 signer. The signature's scope must
  name the stack's region, as AWS requires of a function URL.
- ``auth = "hmac"``: any request reaches the endpoint, which checks its
  producer signature; the local key is :data:`LOCAL_HMAC_KEY`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, quote

from jobkit.endpoint.service import PushEndpoint, Response

PATH = "/jobkit/push"
ACCESS_KEY, SECRET_KEY = "testing", "testing"
SERVICE = "lambda"
#: The producers' HMAC key of a local ``auth = "hmac"`` endpoint (the deployed one reads Secrets Manager).
LOCAL_HMAC_KEY = b"jobkit-local-hmac-key"
MAX_SKEW_S = 15 * 60
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
    r"SignedHeaders=([a-z0-9;_.-]+),\s*Signature=([0-9a-f]{64})$"
)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class SigV4Refused(Exception):
    """The request is not signed as the function URL's IAM auth requires."""


def verify_sigv4(
    method: str, path: str, query: str, headers: Mapping[str, str], body: bytes, now: float, *, expected_region: str
) -> None:
    """Check a request's SigV4 signature against the local credentials and the
    stack's region (AWS's algorithm: a function URL takes only a signature
    scoped to its own region)."""
    match = _AUTHORIZATION.fullmatch(headers.get("authorization", "").strip())
    if match is None:
        raise SigV4Refused("the request is not signed with SigV4 (the function URL's auth is AWS_IAM)")
    access_key, day, region, service, signed, signature = match.groups()
    if access_key != ACCESS_KEY:
        raise SigV4Refused(f"unknown access key {access_key!r}: sign with the local stack's credentials")
    if service != SERVICE:
        raise SigV4Refused(f"signed for the service {service!r}, not {SERVICE!r}")
    if region != expected_region:
        raise SigV4Refused(f"signed for the region {region!r}, but the endpoint is in {expected_region!r}")
    amz_date = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise SigV4Refused("no valid X-Amz-Date header") from None
    if abs(now - signed_at) > MAX_SKEW_S or not amz_date.startswith(day):
        raise SigV4Refused("the signature's time is more than 15 minutes from the wall clock")
    names = signed.split(";")
    if "host" not in names or any(name not in headers for name in names):
        raise SigV4Refused("the signed headers must include host, and every one must be sent")
    canonical_headers = "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names)
    payload = hashlib.sha256(body).hexdigest()  # the body as sent, never a hash the request claims
    claimed = headers.get("x-amz-content-sha256")
    if claimed is not None and claimed != payload:
        raise SigV4Refused("X-Amz-Content-SHA256 is not the SHA-256 of the body (an unsigned payload is refused)")
    canonical_query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(parse_qsl(query, keep_blank_values=True))
    )
    canonical = "\n".join([method, quote(path, safe="/-_.~"), canonical_query, canonical_headers, signed, payload])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = f"AWS4{SECRET_KEY}".encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise SigV4Refused("the signature does not match the request")


class PushRoute:
    """A WSGI app: the push endpoint at :data:`PATH`, everything else to ``app`` (moto)."""

    def __init__(
        self, app: WsgiApp, endpoint: Callable[[], PushEndpoint], *, iam: bool, region: str = "us-east-1"
    ) -> None:
        self._app = app
        self._endpoint = endpoint
        self._iam = iam
        self._region = region

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if str(environ.get("PATH_INFO", "")).rstrip("/") != PATH:
            return self._app(environ, start_response)
        response = self._answer(environ)
        body = response.text().encode("utf-8")
        headers = [*response.headers.items(), ("content-length", str(len(body)))]
        start_response(f"{response.status} {HTTPStatus(response.status).phrase}", headers)
        return [body]

    def _answer(self, environ: dict[str, Any]) -> Response:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        headers = {k[5:].lower().replace("_", "-"): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        for name in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(name):
                headers[name.lower().replace("_", "-")] = str(environ[name])
        method = str(environ.get("REQUEST_METHOD", ""))
        if self._iam:
            try:
                path = str(environ.get("PATH_INFO", ""))
                query = str(environ.get("QUERY_STRING", ""))
                verify_sigv4(method, path, query, headers, body, time.time(), expected_region=self._region)
            except SigV4Refused as exc:
                return Response(403, {"error": f"Forbidden: {exc}"})
        # the query string's bytes as sent (WSGI hands them over as Latin-1): what a GET's HMAC signature covers
        raw_query = str(environ.get("QUERY_STRING", "")).encode("latin-1", "replace").decode("utf-8", "surrogateescape")
        return self._endpoint().handle(method, headers, body, raw_query)
