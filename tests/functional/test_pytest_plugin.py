"""The jobkit_stack fixture finds the declaration wherever pytest is started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DECLARATION = """
[jobkit]
code_dir = "../src"

[types.ping]
class = "pingjobs:PingJob"
"""

JOB = """
from jobkit import Job


class PingJob(Job):
    def run(self) -> bool:
        return True
"""

TEST = """
from jobkit import JobSpecification
from jobkit.testing import Outcome


def test_ping(jobkit_stack):
    jobkit_stack.push(JobSpecification("ping", {}))
    jobkit_stack.drain()
    assert jobkit_stack.outcomes("ping") == {Outcome.SUCCEEDED: 1}
"""


def _project(root: Path, ini: str | None) -> Path:
    (root / "config").mkdir(parents=True)
    (root / "config" / "jobs.toml").write_text(DECLARATION)
    (root / "src").mkdir()
    (root / "src" / "pingjobs.py").write_text(JOB)
    (root / "tests" / "deep").mkdir(parents=True)
    (root / "tests" / "deep" / "test_ping.py").write_text(TEST)
    if ini is not None:
        (root / "pytest.ini").write_text(ini)
    return root


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JOBKIT_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_ini_option_is_relative_to_the_ini_file_wherever_pytest_starts(tmp_path: Path) -> None:
    root = _project(tmp_path / "app", "[pytest]\njobkit_config = config/jobs.toml\n")
    for cwd, target in [(root, "tests"), (root / "tests" / "deep", "."), (tmp_path, "app/tests")]:
        result = _pytest(cwd, target)
        assert "1 passed" in result.stdout, (cwd, result.stdout, result.stderr)


def test_a_missing_declaration_names_the_ini_option(tmp_path: Path) -> None:
    root = _project(tmp_path / "app", "[pytest]\n")  # no jobkit_config, and no infra/jobs.toml
    result = _pytest(root, "tests")
    assert result.returncode == 1
    assert "jobkit_config" in result.stdout and str(root / "infra" / "jobs.toml") in result.stdout
    assert "Traceback" not in result.stdout
