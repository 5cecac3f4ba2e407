"""``GET /jobkit/local`` on ``jobkit local up``'s port: the stack says what it
is, its region and its dummy credentials, so that a command given only
``--endpoint-url`` can use them (:mod:`jobkit.ops.local_endpoint`). Every
other request goes to the wrapped app (moto, the push endpoint)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from jobkit.ops.local_endpoint import PATH, LocalStackIdentity


class IdentityRoute:
    def __init__(self, app: Callable[..., Iterable[bytes]], identity: LocalStackIdentity) -> None:
        self._app = app
        self._body = json.dumps(identity.to_json()).encode()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == PATH and environ.get("REQUEST_METHOD") == "GET":
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(self._body)))])
            return [self._body]
        return self._app(environ, start_response)
