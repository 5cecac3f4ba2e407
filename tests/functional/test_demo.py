"""`jobkit demo` runs the example workload to completion."""

from __future__ import annotations

from click.testing import CliRunner

from jobkit.cli import main
from jobkit.config import Declaration
from jobkit.local.demo import run_demo, workload


def test_demo_runs_every_job_to_an_end(example_declaration: Declaration) -> None:
    summaries, _ = run_demo(example_declaration)
    by_type = {s.job_type: s for s in summaries}
    html = by_type["htmlCacheUpdate"]
    assert html.jobs == 1 + 20  # the root and its leaves of 100 pages
    assert html.succeeded == 21 and html.dead_lettered == 0
    refresh = by_type["refreshLinks"]
    pushed_refresh = sum(1 for s in workload(0) if s.type == "refreshLinks")
    assert refresh.jobs == pushed_refresh
    assert refresh.dead_lettered == 1  # Module:Broken
    assert refresh.failed_attempts == 3  # max_attempts
    assert refresh.succeeded + refresh.skipped + refresh.dead_lettered == pushed_refresh
    assert by_type["enotifNotify"].succeeded == 25
    assert all(s.pickup_p50_ms is not None for s in summaries)


def test_demo_command_prints_the_summary() -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0, result.output
    assert "htmlCacheUpdate" in result.output and "p95 pickup" in result.output


def test_demo_command_reports_a_bad_declaration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "jobs.toml"
    bad.write_text("[types.x]\nclass = 3\n")
    result = CliRunner().invoke(main, ["demo", "--config", str(bad)])
    assert result.exit_code == 1
    assert "types.x.class" in result.output
