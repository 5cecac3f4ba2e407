"""The browser for the `jobkit ui` tests, and whether it ran.

The browser test needs Debian's chromium package (or $JOBKIT_CHROMIUM) and
Playwright for Python (the dev extra); Playwright's own browser download is
not used. Without them it is skipped, and the terminal summary says so in one
line (tests/conftest.py, which pytest-xdist's controller loads); with
JOBKIT_REQUIRE_BROWSER=1 (as CI sets) it fails instead.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import CHROMIUM

#: Flags for a headless run in a container: no sandbox (root), no GPU, and nothing that calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or ``None`` if it can."""
    if not CHROMIUM.is_file():
        return f"no Chromium at {CHROMIUM}: browser test not run"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed: browser test not run"
    return None


def browser_required() -> bool:
    return os.environ.get("JOBKIT_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium, driven by Playwright; skipped (or failed, if required) without one.

    Module-scoped, not session-scoped: while Playwright's sync API is started
    it marks its event loop as running in this thread, so ``asyncio.run()`` in
    any later test on the same worker (the ASGI middleware's) would fail.
    """
    missing = browser_missing()
    if missing is not None:
        if browser_required():
            pytest.fail(f"{missing}, and JOBKIT_REQUIRE_BROWSER=1 requires it", pytrace=False)
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
