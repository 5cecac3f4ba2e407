"""`jobkit demo` tells the job-queue RFC's story on the local stack, and balances."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from jobkit.cli import main
from jobkit.declaration.config import Declaration
from jobkit.local.demo import run_demo


def test_the_story_balances_and_shows_each_mechanism(example_declaration: Declaration) -> None:
    # A smaller fan-out than the command's, with the same story
    report = run_demo(example_declaration, backlinks=20_000, pages=150, watchers=10)
    by_type = {s.job_type: s for s in report.summaries}
    assert report.balances, report.summaries
    html, refresh, enotif = by_type["htmlCacheUpdate"], by_type["refreshLinks"], by_type["enotifNotify"]
    # the third edit's fan-out runs in full: 20,000 pages in leaves of 50
    assert html.run >= 400
    assert html.superseded > 0  # the older edits' leaves and remnants
    assert refresh.duplicate > 0  # the same pages queued by each edit collapse
    assert refresh.dead_lettered == 1 and "Module:Broken" in report.dead_letter_reasons[0]
    assert "attempts_exhausted" in report.dead_letter_reasons[0]
    assert enotif.run == enotif.pushed == 3 * 10 + 1
    assert len(report.delayed) == 1 and "enotifNotify" in report.delayed[0]
    # emails, on their own queue with their own concurrency, are picked up at once
    assert enotif.pickup_p95_ms is not None and refresh.pickup_p95_ms is not None
    assert enotif.pickup_p95_ms <= refresh.pickup_p95_ms


def test_demo_command_prints_the_summary() -> None:
    result = CliRunner().invoke(main, ["demo", "--backlinks", "500", "--pages", "10", "--watchers", "3"])
    assert result.exit_code == 0, result.output
    assert "htmlCacheUpdate" in result.output and "p95 pickup" in result.output
    assert "balances" in result.output


def test_demo_command_reports_a_bad_declaration(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.toml"
    bad.write_text("[types.x]\nclass = 3\n")
    result = CliRunner().invoke(main, ["demo", "--config", str(bad)])
    assert result.exit_code == 1
    assert "types.x.class" in result.output
