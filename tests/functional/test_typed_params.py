"""Typed params: a type's declared params_schema is checked at push, and a body
from any other producer whose params do not match is dead-lettered at its first
delivery with the schema's words, not run until its attempts are used up.

On the local stack (moto), with the test declaration's ``typed`` type
(``schemas/typed.json``: a title and a list of page numbers, nothing else).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from ops_cli import cli_for

from jobkit import JobQueueError, JobSpecification
from jobkit.cli.commands import main
from jobkit.core.outcome import Outcome
from jobkit.core.spec import new_root_job_params
from jobkit.local import LocalStack
from jobkit.records.keys import JobRef

from conftest import FIXTURES
from testjobs import RUNS


def send_raw(stack: LocalStack, params: Any, job_id: str = "from-node-1") -> None:
    """What a producer in another language sends: a body alone."""
    body = {"v": 1, "id": job_id, "type": "typed", "params": params, "enqueuedAt": stack.clock.now()}
    stack.sqs.send_message(QueueUrl=stack.queue_urls["test-typed"], MessageBody=json.dumps(body))


def test_push_refuses_params_that_do_not_match_and_enqueues_the_rest(stack: LocalStack) -> None:
    good = JobSpecification("typed", {"title": "Paris", "pages": [1, 2]})
    bad = JobSpecification("typed", {"title": "Lyon", "pages": ["one"]})
    with pytest.raises(JobQueueError) as caught:
        stack.queue_group().push([good, bad])
    [failed] = caught.value.failed
    assert (failed.job_id, failed.code) == (bad.id, "InvalidParams")
    assert failed.message.endswith("params do not match the type's params_schema: params.pages[0] must be integer")
    assert caught.value.enqueued_ids == (good.id,)
    stack.drain()
    assert [r.job_id for r in stack.results.results] == [good.id]
    assert stack.dead_letters("typed") == []


def test_a_mismatch_from_another_producer_is_dead_lettered_at_once_with_the_schema_error(stack: LocalStack) -> None:
    send_raw(stack, {})  # what failed with KeyError on every attempt before
    stack.drain()
    assert RUNS == []  # the job never ran
    [result] = stack.results.results
    assert (result.outcome, result.attempt) == (Outcome.POISONED, 1)
    [dead] = stack.dead_letters("typed")
    attributes = {k: v.get("StringValue") for k, v in dead["MessageAttributes"].items()}
    assert attributes["jobkit.reason"] == "poison"
    assert attributes["jobkit.errorClass"] == "InvalidParams"
    assert attributes["jobkit.error"] == (
        "typed from-node-1: params do not match the type's params_schema:"
        " params must contain ['pages', 'title'] properties"
    )
    # and the jobs table says so, for `jobkit job` and `jobkit dlq`
    [failure] = stack.journal().failures(JobRef("typed", None, "from-node-1"))
    assert (failure.error_class, failure.dead_letter_reason) == ("InvalidParams", "poison")


def test_the_dlq_tools_show_the_schema_error_as_the_reason(stack: LocalStack) -> None:
    send_raw(stack, {"title": "Paris", "pages": [1, -2]})
    stack.drain()
    jobkit = cli_for(stack)
    [message] = json.loads(jobkit("dlq", "list", "typed", "--json").stdout)["messages"]
    assert (message["reason"], message["verified"], message["error_class"]) == ("poison", True, "InvalidParams")
    assert message["error"].endswith("params.pages[1] must be bigger than or equal to 0")


def test_the_dlq_tools_check_the_schema_themselves_when_the_table_has_no_record(stack: LocalStack) -> None:
    # Dead-lettered by SQS itself (say, by a runner deployed before the schema was declared)
    url = stack.queue_urls["test-typed-dlq"]
    body = {
        "v": 1,
        "id": "old-1",
        "type": "typed",
        "params": {"title": "", "pages": []},
        "enqueuedAt": stack.clock.now(),
    }
    stack.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    [message] = json.loads(cli_for(stack)("dlq", "list", "typed", "--json").stdout)["messages"]
    assert (message["reason"], message["verified"], message["error_class"]) == ("poison", True, "InvalidParams")
    assert message["error"].endswith("params.title must be longer than or equal to 1 characters")


def test_root_and_leaf_params_pass_a_schema_that_does_not_name_them(stack: LocalStack) -> None:
    root = new_root_job_params("typed:Paris", stack.clock.now())
    spec = JobSpecification("typed", {"title": "Paris", "pages": [3], **root})
    stack.queue_group().push(spec)
    stack.drain()
    assert [r.outcome for r in stack.results.results] == [Outcome.SUCCEEDED]


def test_jobkit_schema_prints_what_a_producer_checks_against() -> None:
    config = str(FIXTURES / "jobs.toml")
    result = CliRunner().invoke(main, ["schema", "--config", config, "typed"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    declared = json.loads((FIXTURES / "schemas" / "typed.json").read_text())
    assert printed == {"$schema": "http://json-schema.org/draft-07/schema#", **declared}
    untyped = CliRunner().invoke(main, ["schema", "--config", config, "noop"])
    assert json.loads(untyped.stdout) == {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
    assert "noop declares no params_schema" in untyped.stderr
    unknown = CliRunner().invoke(main, ["schema", "--config", config, "nope"])
    assert unknown.exit_code == 1 and "unknown job type 'nope'" in unknown.output
