"""Why a POST from another site never redrives, deletes, purges or cancels anything.

The pages run with the operator's AWS credentials, so a form on any other
site that posts to ``http://127.0.0.1:<port>/...`` must not act. Two checks,
each enough on its own in a current browser, both required:

- **a token in the form**: a random value made once per process (never
  stored, never logged) that each action form carries in a hidden field;
  another site cannot read the pages, so it cannot know it;
- **where the request comes from**: a browser says so in ``Origin`` and in
  ``Sec-Fetch-Site``; an ``Origin`` other than the page's own, or a
  ``Sec-Fetch-Site`` other than ``same-origin``, is refused. (A client that
  sends neither, such as curl, is no browser another site can drive; it still
  needs the form token.)
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping

from starlette.requests import Request

#: The hidden field that carries the token.
FIELD = "csrf"


class CsrfGuard:
    """The process's form token, and the check of a POST."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)

    def problem(self, request: Request, form: Mapping[str, list[str]]) -> str | None:
        """Why the POST must be refused, or ``None`` if it comes from one of this UI's own pages."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            return f"the request comes from another site (Sec-Fetch-Site: {site})"
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin is not None and origin != own:
            return f"the request comes from another origin ({origin}, not {own})"
        given = form.get(FIELD, [""])[0]
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return "the form's token is missing or wrong: reload the page and try again"
        return None
