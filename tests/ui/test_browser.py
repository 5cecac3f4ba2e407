"""`jobkit ui` in a real browser, against `jobkit local up` in its own process.

The story an operator lives: the overview shows every type and a dead
letter; the type's page says why it died; the job's page has its traceback;
after the fix, a redrive from the page sends it back and it runs. A second
`jobkit ui`, without --allow-actions, shows no button, and a form another
site posts to it is refused, as it is by the first one.

Needs Chromium and Playwright (see conftest.py). With JOBKIT_UI_SCREENSHOTS=DIR
it saves the overview and the job's page there (docs/img has them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jobkit.ops import push_job
from jobkit.ops.config import CliConfig

from process_lines import Lines

ROOT = Path(__file__).resolve().parent.parent.parent
DECLARATION = ROOT / "tests" / "fixtures" / "ui.toml"
TIMEOUT_MS = 30_000


def start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], Lines]:
    process = subprocess.Popen(
        [sys.executable, "-m", "jobkit.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, Lines(process)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


class Stack:
    """`jobkit local up` on ui.toml, and an operator's view of it."""

    def __init__(self, endpoint: str, lines: Lines) -> None:
        self.endpoint = endpoint
        self.lines = lines
        self.config = CliConfig(config_path=DECLARATION, endpoint_url=endpoint)

    def push(self, job_type: str, params: dict[str, Any], **kwargs: Any) -> str:
        return push_job(self.config.queue_group(), job_type, json.dumps(params), **kwargs)

    def dead_letters(self, job_type: str) -> int:
        """SQS's count of the type's DLQ (moto's is exact)."""
        declaration = self.config.declaration
        url = self.config.directory.url(declaration.dlq_name(declaration.types[job_type].queue))
        attributes = self.config.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


@pytest.fixture
def stack() -> Iterator[Stack]:
    env = {**os.environ, "JOBKIT_CONFIG": str(DECLARATION)}
    process, lines = start(["local", "up", "--port", "0"], env)
    try:
        endpoint = lines.wait_for("AWS_ENDPOINT_URL=").strip().split("=", 1)[1]
        lines.wait_for("running jobs")
        yield Stack(endpoint, lines)
    finally:
        stop(process)


def serve_ui(stack: Stack, *flags: str) -> Iterator[str]:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "JOBKIT_UI_TOKEN": ""}
    args = ["ui", "--port", "0", "--interval", "2", "--config", str(DECLARATION), "--endpoint-url", stack.endpoint]
    process, lines = start([*args, *flags], env)
    try:
        yield lines.wait_for("jobkit ui: open ").split("open ", 1)[1].strip()
    finally:
        stop(process)


@pytest.fixture
def ui_with_actions(stack: Stack) -> Iterator[str]:
    yield from serve_ui(stack, "--allow-actions")


@pytest.fixture
def ui_read_only(stack: Stack) -> Iterator[str]:
    yield from serve_ui(stack)


@pytest.fixture
def other_site() -> Iterator[Any]:
    """Another origin (a server on another port), whose page posts a form to a UI."""
    pages: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def page_posting(action: str, fields: dict[str, str]) -> str:
        inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in fields.items())
        pages["/attack"] = f'<form id="f" method="post" action="{action}">{inputs}<button>win a prize</button></form>'
        return f"http://127.0.0.1:{server.server_address[1]}/attack"

    try:
        yield page_posting
    finally:
        server.shutdown()
        server.server_close()


def row(page: Any, job_type: str) -> Any:
    return page.locator(f'table.overview tr[data-type="{job_type}"]')


def test_an_operator_finds_a_dead_job_reads_why_and_redrives_it(
    chromium: Any, stack: Stack, ui_with_actions: str, ui_read_only: str, other_site: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    shots = os.environ.get("JOBKIT_UI_SCREENSHOTS")
    # Given an importer job that fails (its bug is the flag file) and is dead-lettered,
    flag = tmp_path / "bug"
    flag.touch()
    job_id = stack.push("importer", {"flag": str(flag), "source": "users.csv", "rows": 3}, domain="enwiki")
    assert "importer crashed on users.csv" in stack.lines.wait_for(f"dead_lettered importer {job_id}")
    # jobs of other types that ran, and one that waits
    for n in range(3):
        done = stack.push("thumbnail", {"n": n})
        assert "succeeded" in stack.lines.wait_for(done)
    stack.push("reminder", {"to": "someone"}, delay_s=900)
    context = chromium.new_context(viewport={"width": 1360, "height": 760})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    # 1. The overview: a row per type with its counts; the dead letter stands out
    page.goto(ui_with_actions)
    expect(page.locator("table.overview tbody tr")).to_have_count(4)
    expect(row(page, "importer").locator("td.dead")).to_have_text("1")
    expect(row(page, "thumbnail").locator("td.dead")).to_have_text("0")
    expect(row(page, "reminder").locator("td.delayed")).to_have_text("1")
    expect(row(page, "digest").locator("td.delayed")).to_have_text("1")  # a shared queue's counts
    # and it refreshes itself, until CloudWatch has the local stack's rates (published every 5 s)
    expect(row(page, "thumbnail").locator("td").nth(8)).not_to_have_text("-", timeout=45_000)
    # and the last hour's sparkline, from the same metrics
    expect(row(page, "thumbnail").locator("svg.sparkline path.out")).to_have_count(1, timeout=45_000)
    if shots:
        page.wait_for_timeout(2_500)
        page.screenshot(path=str(Path(shots) / "ui-overview.png"), full_page=True)

    # 2. The type's page: its dead letter, and why
    row(page, "importer").get_by_role("link", name="importer").click()
    dead_row = page.locator("table.dead-letters tbody tr")
    expect(dead_row).to_have_count(1)
    expect(dead_row.locator(".reason")).to_have_text("attempts_exhausted")
    expect(dead_row.locator("td.error")).to_contain_text("RuntimeError: importer crashed on users.csv")
    page.get_by_label("reason").select_option("poison")
    page.get_by_role("button", name="filter").click()
    expect(page.get_by_text("No dead letter matches the filter.")).to_be_visible()
    page.get_by_label("reason").select_option("")
    page.get_by_label("error contains").fill("CRASHED")
    page.get_by_role("button", name="filter").click()
    expect(dead_row).to_have_count(1)

    # 3. The job's page: its traceback; its params only on request
    dead_row.get_by_role("link", name=job_id).click()
    expect(page.locator("pre.traceback")).to_contain_text("Traceback (most recent call last)")
    expect(page.locator("pre.traceback")).to_contain_text("RuntimeError: importer crashed on users.csv")
    expect(page.locator("details.params pre")).to_be_hidden()
    if shots:
        page.screenshot(path=str(Path(shots) / "ui-job.png"), full_page=True)
    page.locator("details.params summary").click()
    expect(page.locator("details.params pre")).to_contain_text('"source": "users.csv"')

    # 5. Read only: no action anywhere, and a forged POST is refused
    readonly = context.new_page()
    readonly.set_default_timeout(TIMEOUT_MS)
    for url in (f"{ui_read_only}types/importer", f"{ui_read_only}types/importer/job?id={job_id}"):
        readonly.goto(url)
        expect(readonly.locator("table.dead-letters, pre.traceback").first).to_be_visible()
        expect(readonly.locator("form.action")).to_have_count(0)
        expect(readonly.get_by_role("button", name=re.compile("Redrive|Delete|Purge"))).to_have_count(0)
    for ui, refusal in ((ui_read_only, "actions are off"), (ui_with_actions, "refused: the request comes from")):
        attack = other_site(f"{ui}types/importer/purge", {"confirm": "yes", "csrf": "forged"})
        readonly.goto(attack)
        with readonly.expect_navigation() as navigation:
            readonly.get_by_role("button", name="win a prize").click()
        assert navigation.value.status == 403
        expect(readonly.locator("body")).to_contain_text(refusal)
    assert stack.dead_letters("importer") == 1

    # 4. After the fix, a redrive from the job's page: asked, done, counted, and the job runs
    flag.unlink()
    page.get_by_role("button", name="Redrive").click()
    expect(page.locator("p.question")).to_contain_text("Send 1 dead letter")
    page.get_by_role("button", name="Yes, redrive").click()
    expect(page.locator(".moved-count")).to_have_text("1")
    assert "succeeded" in stack.lines.wait_for(f"importer {job_id}")
    page.goto(ui_with_actions)
    expect(row(page, "importer").locator("td.dead")).to_have_text("0")
    page.goto(f"{ui_with_actions}types/importer/job?id={job_id}")
    expect(page.locator("dd.state")).to_have_text("succeeded")
    expect(page.locator("pre.result")).to_contain_text('"imported": 3')
    expect(page.locator("progress")).to_have_attribute("value", "100.0")
    # and nothing the pages asked for was refused or missing
    assert errors == []
    context.close()
