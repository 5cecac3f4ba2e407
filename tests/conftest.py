"""Shared fixtures: declarations, a local stack on moto with a frozen clock,
and AWS request counting."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import Declaration, load_declaration
from jobkit.local import LocalStack
from jobkit.local.provision import provision_table
from jobkit.records.dynamodb import DynamoDBTable
from jobkit.records.memory import MemoryTable
from jobkit.records.store import Records
from jobkit.records.table import Table

from testjobs import BROKEN, HOOKS, RUNS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
START = 1_800_000_000.0  # 2027-01-15T08:00:00Z: far from any real clock


@pytest.fixture(autouse=True)
def _aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing in the tests may reach a real AWS account.
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def test_declaration() -> Declaration:
    return load_declaration(FIXTURES / "jobs.toml")


@pytest.fixture(params=["memory", "dynamodb"])
def table(request: pytest.FixtureRequest, test_declaration: Declaration) -> Iterator[Table]:
    """The jobs table in memory, then on DynamoDB (moto), provisioned as the
    local stack provisions it: for contract tests that both must pass."""
    if request.param == "memory":
        yield MemoryTable()
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        provision_table(client, test_declaration)
        yield DynamoDBTable(client, test_declaration.table_name)


@pytest.fixture
def records(table: Table) -> Records:
    """The record store over each backend in turn."""
    return Records(table)


@pytest.fixture(scope="session")
def example_declaration() -> Declaration:
    return load_declaration(ROOT / "infra" / "jobs.toml")


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def stack(test_declaration: Declaration, clock: VirtualClock) -> Iterator[LocalStack]:
    with LocalStack(test_declaration, clock=clock, seed=1) as local:
        RUNS.clear()
        HOOKS.clear()
        BROKEN.clear()
        yield local
        BROKEN.clear()  # a test that broke a job class leaves it broken for no other


class RequestCounter:
    """Counts the API calls a boto3 client makes, by operation name."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        client.meta.events.register("before-call.*.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())


@pytest.fixture
def sqs_requests(stack: LocalStack) -> RequestCounter:
    return RequestCounter(stack.sqs)


@pytest.fixture
def dynamodb_requests(stack: LocalStack) -> RequestCounter:
    return RequestCounter(stack.dynamodb)


def string_like(pattern: str, value: str) -> bool:
    """IAM's StringLike: ``*`` is any run of characters, ``?`` any one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


#: The browser test of `jobkit ui` (tests/ui/conftest.py says what it needs), and the Chromium
#: it drives (Debian's package installs it here).
BROWSER_TESTS = "tests/ui/test_browser.py"
CHROMIUM = Path(os.environ.get("JOBKIT_CHROMIUM", "/usr/bin/chromium"))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line on whether the browser test ran: here, not in tests/ui, since under pytest-xdist
    only the controller reports, and it loads no conftest of a test directory."""
    reports = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "nodeid", "").startswith(BROWSER_TESTS)
    ]
    if not reports:
        return
    skipped = [r for r in reports if r.skipped]
    if skipped and len(skipped) == len({r.nodeid for r in reports}):
        longrepr = skipped[0].longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        terminalreporter.write_line(f"jobkit ui browser test: NOT RUN ({reason.removeprefix('Skipped: ')})")
        return
    if any(r.failed for r in reports):
        terminalreporter.write_line("jobkit ui browser test: FAILED (see above)")
    else:
        terminalreporter.write_line(f"jobkit ui browser test: passed, in {CHROMIUM}")
