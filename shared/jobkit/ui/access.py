"""Who may open the pages: the operator's own machine, or whoever holds the token.

The pages show dead letters (job params, error texts) and, with
``--allow-actions``, can delete them, with the operator's AWS credentials. So:

- **Loopback by default.** ``jobkit ui`` binds 127.0.0.1. Any other address
  is refused unless a token is given (:func:`bind_problem`): on a shared
  network, the token is what stands between a neighbour and the queues.
- **A token, when given, on every request** (:class:`TokenGate`): as
  ``Authorization: Bearer <token>``, or once as ``?token=<token>``, which
  answers with a redirect to the same page without it and sets an
  ``HttpOnly``, ``SameSite=Strict`` cookie for the requests that follow. The
  cookie holds a digest of the token, not the token; every comparison is
  :func:`hmac.compare_digest`.
- **Without a token, only loopback Host names** (``127.0.0.1``,
  ``localhost``, ``[::1]``): a page of another site that renames itself to
  127.0.0.1 (DNS rebinding) sends its own name as ``Host``, and is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from urllib.parse import quote, urlencode

from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

#: The cookie that carries a digest of the token after ``?token=``.
COOKIE = "jobkit_ui_session"
#: The query parameter that carries the token once.
TOKEN_PARAMETER = "token"
#: Host names that only ever mean this machine.
LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) can only be reached from this machine."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any address


def bind_problem(host: str, token: str | None) -> str | None:
    """Why the UI must not listen on ``host``, or ``None`` if it may."""
    if is_loopback(host) or token:
        return None
    return (
        f"refusing to serve on {host} without --token (or $JOBKIT_UI_TOKEN): anyone who can reach it could read"
        " your dead letters with your AWS credentials; serve on 127.0.0.1 (and use an SSH tunnel), or give a token"
    )


def session_value(token: str) -> str:
    """What the cookie holds: a digest of the token, so the cookie store never has the token itself."""
    return hmac.new(token.encode(), b"jobkit-ui-session", hashlib.sha256).hexdigest()


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def host_name(host_header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8080`` is ``::1``)."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class TokenGate:
    """ASGI middleware: refuses a request without the token (if there is one),
    or, without a token, one whose ``Host`` is not a loopback name."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback
        self.session = session_value(token) if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        response = self.refusal(HTTPConnection(scope))
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def refusal(self, request: HTTPConnection) -> Response | None:
        """The response that refuses the request, or ``None`` to let it through."""
        if self.token is None:
            if self.loopback and not is_loopback(host_name(request.headers.get("host", ""))):
                return PlainTextResponse("this jobkit ui answers to 127.0.0.1 and localhost only\n", status_code=421)
            return None
        assert self.session is not None
        authorization = request.headers.get("authorization", "")
        if authorization.lower().startswith("bearer ") and _same(authorization[7:].strip(), self.token):
            return None
        given = request.query_params.get(TOKEN_PARAMETER)
        if given is not None:
            if not _same(given, self.token):
                return _unauthorised()
            return self._login(request)
        if _same(request.cookies.get(COOKIE), self.session):
            return None
        return _unauthorised()

    def _login(self, request: HTTPConnection) -> Response:
        """Redirect to the page without the token in its address, with the session cookie."""
        url = request.url
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_PARAMETER]
        # one leading slash, whatever the path decoded to ("//evil.example", "/\t/evil.example"):
        # a redirect to another site would otherwise be one click away
        path = "/" + url.path.lstrip("/\\\t\r\n ")
        target = quote(path, safe="/-_.~") + (f"?{urlencode(kept)}" if kept else "")
        response = RedirectResponse(target, status_code=303)
        assert self.session is not None
        response.set_cookie(
            COOKIE, self.session, httponly=True, samesite="strict", secure=url.scheme == "https", path="/"
        )
        return response


def _unauthorised() -> Response:
    return PlainTextResponse(
        "this jobkit ui needs its token: open the address `jobkit ui` printed (it ends in ?token=...),"
        " or send Authorization: Bearer <token>\n",
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )
