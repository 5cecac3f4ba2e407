"""A producer in another language, written from docs/wire-format.md alone.

The Node.js example (examples/node-producer) pushes to `jobkit local up`, with
the AWS SDK for JavaScript, a plain job, a delayed job, stale leaves in the same
batch as a newer root, stale leaves after a recorded root, a malformed job and
a job whose params break its type's schema. Each must end as the wire format
says: run, superseded, or dead-lettered with its reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from node import node_producer

from conftest import ROOT
from process_lines import Lines


@pytest.fixture
def local_up() -> Iterator[tuple[str, Lines]]:
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
        lines = Lines(process)
        endpoint = lines.wait_for("AWS_ENDPOINT_URL=").strip().split("=", 1)[1]
        lines.wait_for("running jobs")
        yield endpoint, lines
    finally:
        process.kill()
        process.wait()


def producer_env(endpoint: str) -> dict[str, str]:
    """What `jobkit local up` prints for an app: the endpoint, region and credentials."""
    return {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


def jobkit_json(endpoint: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "jobkit.cli", *args, "--json"],
        env={**producer_env(endpoint), "JOBKIT_CONFIG": str(ROOT / "infra" / "jobs.toml")},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def outcome_of(lines: Lines, job_id: str) -> str:
    """The outcome `jobkit local up` printed for the job (its line's first word), in whatever order it came."""
    needle = f" {job_id} "
    line = next((seen for seen in lines.seen if needle in seen), None) or lines.wait_for(needle)
    return line.split()[0]


def test_a_node_producer_pushes_through_sqs_and_every_job_ends_as_documented(local_up: tuple[str, Lines]) -> None:
    endpoint, lines = local_up
    directory = node_producer()
    started = time.monotonic()
    done = subprocess.run(
        ["node", "scenario.mjs"], cwd=directory, env=producer_env(endpoint), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    pushed = json.loads(done.stdout)
    # A plain job runs; a delayed one runs after its delay
    [plain] = pushed["plain"]
    assert outcome_of(lines, plain) == "succeeded"
    [delayed] = pushed["delayed"]
    assert outcome_of(lines, delayed) == "succeeded"
    assert time.monotonic() - started >= 2
    # Stale leaves sent in one batch ahead of a newer root are superseded; the root runs
    [root] = pushed["sameBatchRoot"]
    assert outcome_of(lines, root) == "succeeded"
    assert {outcome_of(lines, leaf) for leaf in pushed["sameBatchStaleLeaves"]} == {"superseded"}
    # Stale leaves sent after their newer root was recorded (one UpdateItem) are superseded
    assert {outcome_of(lines, leaf) for leaf in pushed["recordedStaleLeaves"]} == {"superseded"}
    # A job whose params break the type's schema is dead-lettered at once, with the schema's words
    [bad_params] = pushed["badParams"]
    assert outcome_of(lines, bad_params) == "poisoned"
    # And a malformed job is dead-lettered with its reason
    dead = jobkit_json(endpoint, "dlq", "list", "refreshLinks")["messages"]
    by_body = {message["job_id"] or message.get("body_start", ""): message for message in dead}
    [malformed] = [m for key, m in by_body.items() if pushed["malformed"][0] in key]
    assert (malformed["reason"], malformed["verified"]) == ("poison", True)
    assert "params" in malformed["error"]
    schema_error = by_body[bad_params]
    assert (schema_error["reason"], schema_error["error_class"]) == ("poison", "InvalidParams")
    assert schema_error["error"].endswith("params must contain ['title'] properties")
    assert len(dead) == 2
