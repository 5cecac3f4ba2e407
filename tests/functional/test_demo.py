"""`jobkit demo` tells the job-queue RFC's story on the local stack, and balances."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from jobkit.cli import main
from jobkit.declaration.config import Declaration, load_declaration
from jobkit.local.demo import DECLARATION, DEMO_TYPES, run_demo

ROOT = Path(__file__).resolve().parents[2]


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
    assert "ran on the demo's own declaration, shipped with jobkit" in result.output
    assert "emailDigest" not in result.output  # only the types the story pushes


def test_the_readmes_figures_are_the_ones_the_demo_gives() -> None:
    # Given the README's table of `make demo`
    readme = (ROOT / "README.md").read_text()
    rows = {}
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip("│").split("│")] if line.startswith("│ ") else []
        if cells and cells[0] in DEMO_TYPES and cells[0] not in rows:
            rows[cells[0]] = cells[1:]
    assert set(rows) == set(DEMO_TYPES)
    # When the demo runs with its defaults (on its own declaration, with its modelled batch times)
    report = run_demo(load_declaration(DECLARATION))
    # Then every figure is the README's, pickup delays included
    for summary in report.summaries:
        tallies = ["run", "superseded", "duplicate", "dead-lettered"]
        shown = [f"{summary.pushed:,}", *(f"{summary.tally[t]:,}" for t in tallies)]
        shown += [f"{v:,.0f} ms" if v is not None else "-" for v in (summary.pickup_p50_ms, summary.pickup_p95_ms)]
        assert shown == rows[summary.job_type], summary.job_type
    assert [s.job_type for s in report.summaries] == list(DEMO_TYPES)
    # and each edit's batch line, as its editReached job said it
    shown_batches = [line.removeprefix("batch: ") for line in readme.splitlines() if line.startswith("batch: edit ")]
    assert report.reached == shown_batches


def test_the_demo_in_an_app_without_its_types_says_what_is_missing(tmp_path: Path) -> None:
    app = tmp_path / "jobs.toml"
    app.write_text('[types.welcomeEmail]\nclass = "jobs.welcome:WelcomeEmailJob"\n')
    result = CliRunner().invoke(main, ["demo", "--config", str(app)])
    assert result.exit_code == 1
    assert "not declared: htmlCacheUpdate, refreshLinks, enotifNotify" in result.output
    assert "leave out --config" in result.output and "Traceback" not in result.output


def test_demo_command_reports_a_bad_declaration(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.toml"
    bad.write_text("[types.x]\nclass = 3\n")
    result = CliRunner().invoke(main, ["demo", "--config", str(bad)])
    assert result.exit_code == 1
    assert "types.x.class" in result.output


def test_demo_options_out_of_range_are_usage_errors() -> None:
    for args in (["--pages", "-1"], ["--scenario", "flow-control", "--quiet", "0"]):
        result = CliRunner().invoke(main, ["demo", *args])
        assert result.exit_code == 2 and "is not in the range" in result.output, args
    crossed = CliRunner().invoke(main, ["demo", "--scenario", "flow-control", "--config", "jobs.toml"])
    assert crossed.exit_code == 2 and "--config applies to the rfc scenario" in crossed.output
