"""`jobkit demo --scenario flow-control`: fairness, a rate limit and a debounce
measured on the local stack, in three lines."""

from __future__ import annotations

import re

from click.testing import CliRunner

from jobkit.cli import main
from jobkit.local.flow_demo import observed_rate, run_flow_demo

LINES = [
    re.compile(r"fairness: quiet domain p95 pickup (\d+) ms \(without fairness: (\d+) ms\)"),
    re.compile(r"rate limit: (\d+\.\d) jobs/s observed for key (\S+) \(limit (\d+(?:\.\d+)?)\)"),
    re.compile(r"debounce: (\d+) pushed, (\d+) ran, (\d+) debounced"),
]


def test_at_the_documented_sizes_fairness_lets_the_quiet_domain_through_5x_sooner() -> None:
    # 10,000 noisy jobs, then 100 quiet ones, with and without fairness
    report = run_flow_demo()
    fairness, rate, debounce = (pattern.fullmatch(line) for pattern, line in zip(LINES, report.lines(), strict=True))
    assert fairness and rate and debounce, report.lines()
    with_ms, without_ms = float(fairness[1]), float(fairness[2])
    assert without_ms >= 5 * max(with_ms, 1), report.lines()
    assert report.quiet_p95_without_fairness_ms >= 5 * report.quiet_p95_ms
    # the rate limit held: measured from the jobs' start times, never above the limit
    assert rate[2] == "params.account=acme" and rate[3] == "5"
    assert 0 < report.observed_per_s <= report.limit_per_s
    # every debounced page ran once, for its last edit; the others were debounced
    assert (report.debounce_pushed, report.debounce_ran, report.debounced) == (50, 5, 45)
    assert report.wall_s < 60


def test_the_command_prints_the_three_lines() -> None:
    result = CliRunner().invoke(main, ["demo", "--scenario", "flow-control", "--noisy", "1500", "--quiet", "20"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(p.fullmatch(line) for p, line in zip(LINES, lines, strict=True)), lines


def test_the_observed_rate_is_starts_over_the_busy_period() -> None:
    assert observed_rate([10.0, 10.2, 10.4, 10.6, 10.8, 11.0]) == 5.0
    assert observed_rate([3.0]) == 0.0
