"""The benchmark scripts run, at a tiny size. (Nothing here is timed.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_the_benchmarks_run_and_write_results(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- bench:start -->\nSTALE TABLE\n<!-- bench:end -->\nafter\n")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--out", str(out), "--readme", str(readme)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["push"]["results"]["jobkit push()"]["sqs_requests_per_job"] <= 0.1
    assert results["runner"]["jobkit"]["plain"]["dynamodb_requests_per_job"] == 0
    priced = set(results["cost"]["dollars_per_million_jobs"])
    assert priced >= set(results["runner"]["jobkit"])
    assert {"waits 20 ms, batch_concurrency = 1", "waits 20 ms, batch_concurrency = 10"} <= priced
    flow = results["flow"]["cases"]
    assert flow["rate limit, one key, under the limit"]["dynamodb_requests_per_job"] <= 0.2
    assert flow["debounce, ten jobs of one key per batch"]["debounced"] == 180
    # a 1 h delay: 3 hops of 900 s after the push's own, and it runs once
    assert (results["long_delay"]["hops"], results["long_delay"]["ran"]) == (3, 1)
    assert results["verify"]["exit_status"] == 0
    text = readme.read_text()
    assert text.startswith("before\n<!-- bench:start -->\n") and text.endswith("<!-- bench:end -->\nafter\n")
    assert "STALE TABLE" not in text and "SQS requests / job" in text
