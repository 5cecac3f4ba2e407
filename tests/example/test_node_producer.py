"""A producer in another language, written from docs/wire-format.md alone.

The Node.js example (examples/node-producer) pushes to `jobkit local up`, with
the AWS SDK for JavaScript, a plain job, a delayed job, stale leaves in the same
batch as a newer root, stale leaves after a recorded root, a malformed job and
a job whose params break its type's schema: once through SQS, once through the
HTTP push endpoint (signed with SigV4). Each must end as the wire format says:
run, superseded, or, through SQS, dead-lettered with its reason; the endpoint
refuses the last two at once, with the same reasons.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest
from local_up import app_env, jobkit_json, local_up_process, printed
from node import node_producer

from process_lines import Lines


@pytest.fixture
def local_up() -> Iterator[tuple[str, str, Lines]]:
    with local_up_process() as (_, lines):
        endpoint, push_url = printed(lines, "AWS_ENDPOINT_URL"), printed(lines, "JOBKIT_PUSH_URL")
        lines.wait_for("running jobs")
        yield endpoint, push_url, lines


def outcome_of(lines: Lines, job_id: str) -> str:
    """The outcome `jobkit local up` printed for the job (its line's first word), in whatever order it came."""
    needle = f" {job_id} "
    line = next((seen for seen in lines.seen if needle in seen), None) or lines.wait_for(needle)
    return line.split()[0]


@pytest.mark.parametrize("via", ["sqs", "http"])
def test_a_node_producer_pushes_and_every_job_ends_as_documented(local_up: tuple[str, str, Lines], via: str) -> None:
    endpoint, push_url, lines = local_up
    directory = node_producer()
    started = time.monotonic()
    done = subprocess.run(
        ["node", "scenario.mjs", "--via", via],
        cwd=directory,
        env={**app_env(endpoint), "JOBKIT_PUSH_URL": push_url},
        capture_output=True,
        text=True,
        timeout=120,
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
    # Stale leaves sent after their newer root was recorded are superseded: through SQS
    # the producer recorded it (one UpdateItem), through HTTP the endpoint did
    assert {outcome_of(lines, leaf) for leaf in pushed["recordedStaleLeaves"]} == {"superseded"}
    [malformed], [bad_params] = pushed["malformed"], pushed["badParams"]
    answers = pushed["answers"]
    if via == "http":
        # The endpoint refuses a malformed job and bad params at once, with the reasons
        assert answers["malformed"] == {
            "id": malformed,
            "enqueued": False,
            "error": "field 'params' must be an object, got str",
        }
        assert answers["badParams"]["enqueued"] is False
        assert answers["badParams"]["error"].endswith("params must contain ['title'] properties")
        assert jobkit_json(endpoint, "dlq", "list", "refreshLinks")["messages"] == []
        return
    # Through SQS, a job whose params break the type's schema is dead-lettered at once
    assert outcome_of(lines, bad_params) == "poisoned"
    # and a malformed job is dead-lettered with its reason
    dead = jobkit_json(endpoint, "dlq", "list", "refreshLinks")["messages"]
    by_body = {message["job_id"] or message.get("body_start", ""): message for message in dead}
    [malformed_letter] = [m for key, m in by_body.items() if malformed in key]
    assert (malformed_letter["reason"], malformed_letter["verified"]) == ("poison", True)
    assert "params" in malformed_letter["error"]
    schema_error = by_body[bad_params]
    assert (schema_error["reason"], schema_error["error_class"]) == ("poison", "InvalidParams")
    assert schema_error["error"].endswith("params must contain ['title'] properties")
    assert len(dead) == 2
