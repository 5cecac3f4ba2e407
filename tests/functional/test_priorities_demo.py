"""`jobkit demo --scenario priorities`: urgent jobs in a lane of their own are
picked up past a backlog, measured on the local stack."""

from __future__ import annotations

import re

from click.testing import CliRunner

from jobkit.cli import main
from jobkit.declaration.config import load_declaration
from jobkit.local.priorities_demo import BULK, DECLARATION, URGENT, run_priorities_demo, without_lanes

LINE = re.compile(r"priorities: high lane p95 pickup (\d+) ms \(without lanes: (\d+) ms\)")


def test_at_the_documented_sizes_the_high_lane_is_picked_up_5x_sooner() -> None:
    # 10,000 jobs queued in the queue's own lane, then 100 in the high lane, with and without lanes
    assert (BULK, URGENT) == (10_000, 100)
    report = run_priorities_demo()
    [line] = report.lines()
    found = LINE.fullmatch(line)
    assert found, line
    assert float(found[2]) >= 5 * max(float(found[1]), 1), line
    assert report.gain >= 5 and report.wall_s < 60


def test_without_lanes_is_the_same_queue_with_their_concurrency_and_no_lanes() -> None:
    declaration = load_declaration(DECLARATION)
    plain = without_lanes(declaration)
    [queue] = plain.queues.values()
    assert [lane.priority for lane in queue.lanes] == [None]
    assert queue.max_concurrency == sum(lane.max_concurrency for lane in declaration.queues[queue.name].lanes) == 6


def test_the_command_prints_its_line() -> None:
    result = CliRunner().invoke(main, ["demo", "--scenario", "priorities", "--bulk", "1500", "--urgent", "20"])
    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert LINE.fullmatch(line), line
    refused = CliRunner().invoke(main, ["demo", "--scenario", "priorities", "--config", "x.toml"])
    assert refused.exit_code != 0 and "--config applies to the rfc scenario" in refused.output
