"""The `jobkit ui` app under Starlette's TestClient, for the tests of its pages and actions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.ui.app import create_app
from jobkit.ui.csrf import CsrfGuard
from jobkit.ui.settings import UiSettings

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOCAL = "http://127.0.0.1:8765"
CSRF = "the-csrf-token-of-this-test-process"
TOKEN = "s3cret-token-for-the-tests"


class Ui:
    """A TestClient on the app, built from the CLI's own CliConfig on the
    stack's clock; the clock moves a second after each request."""

    def __init__(
        self,
        stack: LocalStack,
        settings: UiSettings,
        base_url: str = LOCAL,
        config_path: Path = FIXTURES / "jobs.toml",
    ) -> None:
        config = CliConfig(config_path=config_path, clock=stack.clock)
        self.stack = stack
        self.client = TestClient(create_app(config, settings, csrf=CsrfGuard(CSRF)), base_url=base_url)

    def get(self, url: str, **kwargs: Any) -> Any:
        response = self.client.get(url, **kwargs)
        self.stack.clock.advance(1)
        return response

    def post(self, url: str, data: dict[str, object], **kwargs: Any) -> Any:
        response = self.client.post(url, data=data, **kwargs)
        self.stack.clock.advance(1)
        return response


def form(**fields: object) -> dict[str, object]:
    """An action's form, with this process's form token."""
    return {"csrf": CSRF, **fields}


def forms(page: str, action: str) -> list[tuple[str, dict[str, str], list[str]]]:
    """The action forms of a page that post to a URL ending in ``action``: each
    one's URL, hidden fields and the names of its other inputs, as a browser sees them."""
    found = []
    for url, body in re.findall(r'<form class="action[^"]*" method="post" action="([^"]+)">(.*?)</form>', page, re.S):
        if not url.endswith(action):
            continue
        hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body))
        others = re.findall(r'<input type="(?:text|checkbox)" name="([^"]+)"', body)
        found.append((url, hidden, others))
    return found
