"""The ops commands' tables in an 80-column terminal, on the local stack, with
the names of a real deployment: nothing wider than the terminal, no column
crushed, and type names and counts whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli import main
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import load_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig

from conftest import START

WIDTH = 80

DECLARATION = """
[jobkit]
prefix = "prod"
namespace = "jobkit-narrow"

[types.htmlCacheUpdate]
class = "testjobs:AlwaysFailsJob"
max_attempts = 2
track_status = true

[types.refreshLinks]
class = "testjobs:NoopJob"
queue = "lowTraffic"

[types.enotifNotify]
class = "testjobs:NoopJob"
queue = "lowTraffic"

[types.categoryMembershipChange]
class = "testjobs:NoopJob"
queue = "lowTraffic"
"""

WHY = "the parser crashed while expanding {{Infobox settlement}} on Template:Infobox_settlement"


@pytest.fixture
def jobs_toml(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(DECLARATION)
    return path


@pytest.fixture
def wiki(jobs_toml: Path) -> Iterator[LocalStack]:
    with LocalStack(load_declaration(jobs_toml), clock=VirtualClock(START), seed=1, publish_metrics=True) as stack:
        yield stack


def jobkit(stack: LocalStack, jobs_toml: Path, *args: str) -> list[str]:
    """The command's output lines in an 80-column terminal, each checked to fit."""
    config = CliConfig(config_path=jobs_toml, clock=stack.clock)
    result = CliRunner().invoke(main, list(args), obj=config, env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    stack.clock.advance(1)  # what a command received is visible again (moto compares strictly)
    lines = result.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= WIDTH, result.stdout
    return lines


def table(lines: list[str]) -> list[list[str]]:
    """The cells of each line of a table's body, after checking that no column
    is crushed: each is at least 5 wide ("DLQ" and a space either side)."""
    top = next(line for line in lines if line.startswith("┏"))
    assert min(len(part) for part in top.strip("┏┓").split("┳")) >= 5, top
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if line.startswith("│")]


def row(cells: list[list[str]], first: str) -> list[str]:
    return next(line for line in cells if line[0] == first)


def test_every_view_reads_in_80_columns(wiki: LocalStack, jobs_toml: Path) -> None:
    # Given two dead htmlCacheUpdate jobs with a long error ...
    group = wiki.queue_group(domain="enwiki")
    dead = [JobSpecification("htmlCacheUpdate", {"why": WHY, "n": n}) for n in range(2)]
    group.push(dead)
    wiki.drain()
    assert wiki.queue_depth("htmlCacheUpdate", dlq=True) == 2
    # ... and a backlog of 1,234 jobs on the shared queue, 12m34s old in SQS's metrics
    group.push([JobSpecification("categoryMembershipChange", {"n": n}) for n in range(1_234)])
    wiki.clock.advance(754)
    assert wiki.metrics_publisher is not None
    wiki.metrics_publisher.publish()
    wiki.clock.advance(1)
    # When an operator looks in an 80-column terminal, then every view fits,
    # no column is crushed, and names and counts are whole
    queues = table(jobkit(wiki, jobs_toml, "queues"))
    assert row(queues, "prod-htmlCacheUpdate")[:2] == ["prod-htmlCacheUpdate", "htmlCacheUpdate"]
    assert row(queues, "prod-lowTraffic")[2] == "1,234"
    assert any(cells[1].startswith("categoryMembershipChange") for cells in queues)
    top = table(jobkit(wiki, jobs_toml, "top", "--once"))
    assert row(top, "categoryMembershipChange")[1] == "1,234" and "12m34s" in row(top, "refreshLinks")
    assert row(top, "htmlCacheUpdate")[-1] == "2"  # its DLQ
    listed = table(jobkit(wiki, jobs_toml, "dlq", "list", "htmlCacheUpdate"))
    firsts = [cells for cells in listed if cells[1]]
    assert [cells[1:3] for cells in firsts] == [["htmlCacheUpdate", "attempts_exhausted"]] * 2
    assert all(cells[3] == "RuntimeError:" for cells in firsts)
    assert {cells[0] for cells in firsts} == {spec.id[:18] for spec in dead}  # an ID folds over two lines
    shown = "\n".join(jobkit(wiki, jobs_toml, "dlq", "show", "htmlCacheUpdate", dead[0].id))
    assert f"job id               {dead[0].id}" in shown and "attempts_exhausted (verified)" in shown
    job = [line.split() for line in jobkit(wiki, jobs_toml, "job", dead[1].id)]
    assert ["type", "htmlCacheUpdate"] in job and ["state", "dead_lettered"] in job
    # and the figures are the ones --json gives
    frame = json.loads("\n".join(jobkit(wiki, jobs_toml, "top", "--once", "--json")))
    assert {t["type"]: t["backlog"] for t in frame["types"]}["categoryMembershipChange"] == 1_234
