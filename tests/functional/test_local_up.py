"""`jobkit local up` serves the local stack to other processes and runs their jobs."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from conftest import ROOT

PUSH = """
from jobkit import JobSpecification, queue_group
[job_id] = queue_group("enwiki").push(JobSpecification("refreshLinks", {"title": "Main Page"}))
print(job_id)
"""


class Lines:
    """A subprocess's stdout, line by line, with a timeout (no test hangs)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(target=lambda: [self._lines.put(line) for line in stdout], daemon=True).start()

    def wait_for(self, text: str, timeout: float = 60) -> str:
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} in time; saw: {self.seen}") from None
            self.seen.append(line)
            if text in line:
                return line


@pytest.fixture
def local_up() -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    env = {**os.environ, "JOBKIT_CONFIG": str(ROOT / "infra" / "jobs.toml")}
    process = subprocess.Popen(
        [sys.executable, "-m", "jobkit.cli", "local", "up", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, Lines(process)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_app_in_another_process_pushes_and_the_job_runs(local_up: tuple[subprocess.Popen[str], Lines]) -> None:
    process, lines = local_up
    endpoint = lines.wait_for("AWS_ENDPOINT_URL=").strip().split("=", 1)[1]
    assert endpoint.startswith("http://127.0.0.1:")
    # Given an app process that knows only the endpoint and the declaration
    app_env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "JOBKIT_CONFIG": str(ROOT / "infra" / "jobs.toml"),
    }
    pushed = subprocess.run([sys.executable, "-c", PUSH], env=app_env, capture_output=True, text=True, timeout=60)
    assert pushed.returncode == 0, pushed.stderr
    job_id = pushed.stdout.strip()
    # Then the local stack runs it
    line = lines.wait_for(job_id)
    assert "succeeded" in line and "refreshLinks" in line
    # And Ctrl-C stops it cleanly
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    lines.wait_for("stopping")
