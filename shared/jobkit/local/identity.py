"""``jobkit local up``'s own routes on its port, in front of the AWS API:

- ``GET /jobkit/local``: what the stack is, its region, its dummy
  credentials and its clock, so that a command given only ``--endpoint-url``
  can use them (:mod:`jobkit.ops.local_endpoint`);
- ``POST /jobkit/local/advance`` with ``{"seconds": N}``: moves the stack's
  clock forward (``jobkit local advance 2h``), so a delay, a backoff or a
  schedule comes due without the wait.

Every other request goes to the wrapped app (moto, the push endpoint).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from jobkit.ops.local_endpoint import ADVANCE_PATH, MAX_ADVANCE_S, PATH, LocalStackIdentity


class IdentityRoute:
    def __init__(
        self,
        app: Callable[..., Iterable[bytes]],
        identity: Callable[[], LocalStackIdentity],
        advance: Callable[[float], float] | None = None,
    ) -> None:
        self._app = app
        self._identity = identity
        self._advance = advance

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO"), environ.get("REQUEST_METHOD")
        if path == PATH and method == "GET":
            return _json(start_response, "200 OK", self._identity().to_json())
        if path == ADVANCE_PATH and method == "POST":
            return self._advanced(environ, start_response)
        return self._app(environ, start_response)

    def _advanced(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self._advance is None:
            return _json(start_response, "409 Conflict", {"error": "this stack runs on the system clock"})
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            seconds = json.loads(environ["wsgi.input"].read(min(length, 4096)))["seconds"]
            if not isinstance(seconds, int | float) or not 0 < seconds <= MAX_ADVANCE_S:
                raise ValueError(seconds)
        except (KeyError, TypeError, ValueError):
            return _json(
                start_response, "400 Bad Request", {"error": f'send {{"seconds": N}}, 0 < N <= {MAX_ADVANCE_S}'}
            )
        return _json(start_response, "200 OK", {"now": self._advance(float(seconds))})


def _json(start_response: Callable[..., Any], status: str, data: object) -> list[bytes]:
    body = json.dumps(data).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
