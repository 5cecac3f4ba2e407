"""The security headers of every response.

- ``Content-Security-Policy``: everything from this server only
  (``default-src 'self'``), no inline script, no framing, forms post here only.
  The pages load nothing from anywhere else, so this costs them nothing.
- ``Cache-Control: no-store``: dead letters may hold personal data; no copy
  stays in a browser's cache.
- ``Referrer-Policy: same-origin``: no address of these pages leaves them
  (``no-referrer`` would make browsers send ``Origin: null`` with the pages'
  own forms, which :mod:`jobkit.ui.csrf` refuses).
- ``X-Content-Type-Options: nosniff``,
  ``X-Frame-Options: DENY`` and the cross-origin isolation headers, for
  browsers that read those rather than the policy.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
    " object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware: adds :data:`HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)
