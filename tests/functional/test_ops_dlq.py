"""Dead-letter tooling on the local stack, through the CLI: list, show, redrive,
purge and delete; and the native StartMessageMoveTask call that moto lacks.

The CLI builds its own boto3 clients; inside the in-process moto they reach
the local stack. Its clock is the stack's frozen virtual clock (passed as
click's ``obj``). moto makes a released message visible only once the clock
has moved past the release ("now > visible_at"), so tests move it a second
between commands that read the same DLQ.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ops_cli import Cli, cli_for

from jobkit import JobSpecification, NonRetryableError
from jobkit.core.outcome import Outcome
from jobkit.local import LocalStack
from jobkit.ops import redrive, resolve_scope
from jobkit.sqs import QueueDirectory

from conftest import START
from testjobs import BROKEN, HOOKS, RUNS


@pytest.fixture
def jobkit(stack: LocalStack) -> Cli:
    return cli_for(stack, columns=200)


def as_json(jobkit: Cli, *args: str) -> Any:
    return json.loads(jobkit(*args, "--json").stdout)


def dead_buggy_jobs(stack: LocalStack, **errors: str) -> dict[str, JobSpecification]:
    """One buggy job per page, failing with the given error; all dead-lettered."""
    BROKEN.update(errors)
    specs = {
        page: JobSpecification("buggy", {"page": page, "error": error}, domain="enwiki")
        for page, error in errors.items()
    }
    stack.queue_group().push(list(specs.values()))
    stack.drain()
    assert stack.queue_depth("buggy", dlq=True) == len(specs)
    return specs


def test_failed_jobs_are_listed_with_their_error_without_being_consumed(stack: LocalStack, jobkit: Cli) -> None:
    specs = dead_buggy_jobs(stack, A="parser crashed", B="timeout talking to the cache")
    stack.clock.advance(90)
    listing = as_json(jobkit, "dlq", "list", "buggy")
    by_id = {m["job_id"]: m for m in listing["messages"]}
    assert set(by_id) == {specs["A"].id, specs["B"].id}
    a = by_id[specs["A"].id]
    assert (a["type"], a["domain"], a["attempts"], a["reason"]) == ("buggy", "enwiki", 1, "attempts_exhausted")
    assert (a["error_class"], a["error"]) == ("RuntimeError", "parser crashed on A")
    assert a["source_queue"] == "test-buggy"
    assert a["age_s"] == pytest.approx(90, abs=0.01)
    assert by_id[specs["B"].id]["error"] == "timeout talking to the cache on B"
    # People get a table with the same facts (a second later)
    table = jobkit("dlq", "list", "buggy").stdout
    assert specs["A"].id in table and "parser crashed on A" in table and "1m31s" in table
    # Listing consumed nothing: the same two are there, and listed again
    assert stack.queue_depth("buggy", dlq=True) == 2
    assert {m["job_id"] for m in as_json(jobkit, "dlq", "list", "buggy")["messages"]} == set(by_id)


def test_redrive_error_contains_moves_exactly_the_matching_jobs_and_they_run(stack: LocalStack, jobkit: Cli) -> None:
    # Given three dead jobs, two with the parser bug
    specs = dead_buggy_jobs(stack, A="parser crashed", B="Parser crashed", C="timeout talking to the cache")
    # When the fix is deployed and the parser failures are redriven
    BROKEN.clear()
    report = as_json(jobkit, "dlq", "redrive", "buggy", "--error-contains", "parser crashed")
    assert report["mode"] == "copy"
    assert report["moved"] == 2 and report["not_sent"] == [] and report["not_deleted"] == []
    assert set(report["job_ids"]) == {specs["A"].id, specs["B"].id}
    assert stack.queue_depth("buggy", dlq=True) == 1
    # Then they run, on a fresh first attempt, and succeed; the other stays dead
    RUNS.clear()
    stack.drain()
    for page in ("A", "B"):
        [run] = stack.results.attempts(specs[page].id)[-1:]
        assert (run.outcome, run.attempt) == (Outcome.SUCCEEDED, 1)
    assert {job_id for _, job_id, event in RUNS if event == "run"} == {specs["A"].id, specs["B"].id}
    assert [m["job_id"] for m in as_json(jobkit, "dlq", "list", "buggy")["messages"]] == [specs["C"].id]


def test_redrive_by_id_and_dry_run(stack: LocalStack, jobkit: Cli) -> None:
    specs = dead_buggy_jobs(stack, A="parser crashed", B="parser crashed")
    dry = as_json(jobkit, "dlq", "redrive", "buggy", "--error-contains", "parser", "--dry-run")
    assert dry["mode"] == "dry_run" and set(dry["job_ids"]) == {specs["A"].id, specs["B"].id} and dry["moved"] == 0
    assert stack.queue_depth("buggy", dlq=True) == 2 and stack.queue_depth("buggy") == 0
    moved = as_json(jobkit, "dlq", "redrive", "buggy", "--id", specs["B"].id)
    assert moved["job_ids"] == [specs["B"].id] and moved["moved"] == 1
    assert stack.queue_depth("buggy", dlq=True) == 1 and stack.queue_depth("buggy") == 1


def test_a_whole_queue_redrive_falls_back_to_copying_where_move_tasks_are_missing(
    stack: LocalStack, jobkit: Cli
) -> None:
    # moto has no StartMessageMoveTask: the whole-DLQ redrive copies instead
    spec = JobSpecification("alwaysFails", {"why": "a bug"})
    stack.queue_group().push(spec)
    stack.drain()
    [dead] = stack.dead_letters("alwaysFails")
    stack.clock.advance(1)
    report = as_json(jobkit, "dlq", "redrive", "alwaysFails")
    assert report["mode"] == "copy" and report["moved"] == 1
    assert "StartMessageMoveTask" in report["native_unavailable"]
    # The copy is the same body, with its type and without the old reason, and
    # SQS counts its receives afresh
    [message] = stack.sqs.receive_message(
        QueueUrl=stack.queue_urls["test-alwaysFails"],
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    )["Messages"]
    assert message["Body"] == dead["Body"]
    # the request that caused it, kept; and when SQS first saw the job, which orders it (not the redrive)
    assert set(message["MessageAttributes"]) == {"JobType", "CorrelationId", "jobkit.enqueuedAt"}
    assert float(message["MessageAttributes"]["jobkit.enqueuedAt"]["StringValue"]) == START
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert stack.queue_depth("alwaysFails", dlq=True) == 0


def test_a_redriven_job_gets_its_full_attempts_even_after_a_deferral(stack: LocalStack, jobkit: Cli) -> None:
    # Given a remove-duplicates job J whose first attempt fails ...
    j, twin = (JobSpecification("hooked", {"page": "X"}) for _ in range(2))
    stack.queue_group().push(j)
    stack.clock.advance(1)
    HOOKS.append(lambda: False)
    assert stack.poll_once() == 1
    # ... and which comes back while its twin runs: deferred as a new message, which
    # the runner marks (jobkit.deferred) and for which it records the attempt used

    def deliver_j_then_fail_for_good() -> bool:
        wake = stack.next_wakeup()
        assert wake is not None
        stack.clock.advance(wake - stack.clock.now() + 0.01)
        assert stack.poll_once() == 1
        raise NonRetryableError("the twin fails for good")

    stack.queue_group().push(twin)
    HOOKS.extend([deliver_j_then_fail_for_good, lambda: False])
    stack.poll_once()
    deferred = [r for r in stack.results.results if r.job_id == j.id and r.outcome is Outcome.DEFERRED]
    assert [r.attempt for r in deferred] == [2]
    # When the deferred copy fails its second attempt, and its runner then dies
    # until SQS's redrive policy moves it (keeping its attributes)
    stack.clock.advance(stack.declaration.queues["hooked"].visibility_timeout_s)
    assert stack.poll_once() == 1
    assert [r.attempt for r in stack.results.attempts(j.id)][-1] == 2
    url = stack.queue_url("hooked")
    for _ in range(2):
        stack.clock.advance(stack.declaration.queues["hooked"].visibility_timeout_s + 60)
        assert stack.sqs.receive_message(QueueUrl=url)["Messages"]
    stack.clock.advance(stack.declaration.queues["hooked"].visibility_timeout_s + 60)
    assert "Messages" not in stack.sqs.receive_message(QueueUrl=url)
    [dead] = as_json(jobkit, "dlq", "show", "hooked", j.id)["messages"]
    assert "jobkit.deferred" in dead["attributes"]
    assert (dead["reason"], dead["attempts"]) == ("redrive_policy", 2)
    # Then, fixed and redriven, it is a new message without the marker: it gets
    # the type's full max_attempts again (two more failures, then a success)
    moved = as_json(jobkit, "dlq", "redrive", "hooked", "--id", j.id)
    assert moved["moved"] == 1 and moved["message_ids"] == [dead["message_id"]]
    stack.results.clear()
    HOOKS.extend([lambda: False, lambda: False])
    stack.drain()
    assert [(r.attempt, r.outcome) for r in stack.results.attempts(j.id)] == [
        (1, Outcome.RETRIED),
        (2, Outcome.RETRIED),
        (3, Outcome.SUCCEEDED),
    ]
    assert stack.queue_depth("hooked") == 0


class CaptureMoveTask:
    """Captures StartMessageMoveTask requests on a real client and answers them
    as SQS would: moto cannot serve this one call, so the hook stands in for
    the service, after botocore has validated the request against the API model."""

    def __init__(self, client: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        client.meta.events.register("provide-client-params.sqs.StartMessageMoveTask", self._capture)
        client.meta.events.register("before-call.sqs.StartMessageMoveTask", self._answer)

    def _capture(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(dict(params))

    def _answer(self, **_: Any) -> Any:
        class _Http:
            status_code, headers, content = 200, {}, b""

        return _Http(), {"TaskHandle": "task-1"}


def test_a_whole_queue_redrive_on_aws_is_a_native_move_task(stack: LocalStack) -> None:
    # Given dead letters in a queue of its own
    stack.queue_group().push([JobSpecification("alwaysFails", {"n": n}) for n in range(3)])
    stack.drain()
    capture = CaptureMoveTask(stack.sqs)
    directory = QueueDirectory(stack.sqs, stack.declaration)
    # When the whole DLQ is redriven
    report = redrive(stack.sqs, directory, resolve_scope(stack.declaration, "alwaysFails"))
    # Then SQS is asked to move it, from the DLQ to the queue (named: SQS does
    # not know the source of messages the runner sent), and nothing is copied
    arn = "arn:aws:sqs:us-east-1:123456789012:test-alwaysFails"
    assert capture.requests == [{"SourceArn": f"{arn}-dlq", "DestinationArn": arn}]
    assert (report.mode, report.task_handle, report.approximate) == ("native", "task-1", 3)
    assert stack.queue_depth("alwaysFails", dlq=True) == 3 and stack.queue_depth("alwaysFails") == 0
    # and filtered or shared-queue redrives never start one: it cannot filter
    redrive(stack.sqs, directory, resolve_scope(stack.declaration, "alwaysFails"), ids=["nope"])
    redrive(stack.sqs, directory, resolve_scope(stack.declaration, "rare"))
    assert len(capture.requests) == 1


def test_show_has_the_full_spec_and_every_failure(stack: LocalStack, jobkit: Cli) -> None:
    spec = JobSpecification("alwaysFails", {"why": "a bug"}, domain="dewiki")
    stack.queue_group().push(spec)
    stack.drain()
    [shown] = as_json(jobkit, "dlq", "show", "alwaysFails", spec.id)["messages"]
    assert shown["body"]["params"] == {"why": "a bug"} and shown["body"]["domain"] == "dewiki"
    assert [f["attempt"] for f in shown["failures"]] == [3, 2, 1]
    assert all("RuntimeError: always fails (a bug)" in f["traceback"] for f in shown["failures"])
    text = jobkit("dlq", "show", "alwaysFails", spec.id).stdout
    assert "failed attempt 2" in text and '"why": "a bug"' in text
    missing = jobkit("dlq", "show", "alwaysFails", "no-such-job", ok=False)
    assert missing.exit_code == 1 and "no dead letter with job or message ID no-such-job" in missing.output


def test_a_message_moved_by_the_redrive_policy_shows_its_failure_record(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job whose first attempt failed (and wrote a failure record) ...
    spec = JobSpecification("flaky", {"fail_times": 9})
    stack.queue_group().push(spec)
    stack.poll_once()
    url = stack.queue_urls["test-flaky"]
    # ... and whose runner then crashed twice (received, never answered)
    for _ in range(2):
        stack.clock.advance(stack.declaration.queues["flaky"].visibility_timeout_s + 60)
        assert stack.sqs.receive_message(QueueUrl=url)["Messages"]
    # When SQS's redrive policy moves it on its next receive
    stack.clock.advance(stack.declaration.queues["flaky"].visibility_timeout_s + 60)
    assert "Messages" not in stack.sqs.receive_message(QueueUrl=url)
    # Then it carries no reason, and the failure record tells the error
    [dead] = as_json(jobkit, "dlq", "list", "flaky")["messages"]
    assert (dead["job_id"], dead["reason"]) == (spec.id, "redrive_policy")
    assert (dead["error_class"], dead["error"], dead["attempts"]) == ("ConnectionError", "flaky: attempt 1 failed", 1)


def test_a_poison_message_shows_the_start_of_its_body(stack: LocalStack, jobkit: Cli) -> None:
    body = "{this is not json" + "x" * 500
    stack.sqs.send_message(QueueUrl=stack.queue_urls["test-noop"], MessageBody=body)
    stack.drain()
    [dead] = as_json(jobkit, "dlq", "list", "noop")["messages"]
    assert (dead["job_id"], dead["type"], dead["readable"], dead["reason"]) == (None, None, False, "poison")
    assert dead["body_start"] == body[:120] and dead["parse_error"].startswith("message body is not valid JSON")
    # the error is the tool's own parse, verified, and the runner's attributes agree
    assert (dead["error_class"], dead["verified"], dead["error"]) == ("SpecError", True, dead["parse_error"])
    assert dead["claimed"]["reason"] == "poison"


def push_poison(stack: LocalStack, job_type: str) -> None:
    """A malformed message that claims a type in the JobType attribute: not a
    job, so it belongs to no type (only the queue's whole DLQ)."""
    stack.sqs.send_message(
        QueueUrl=stack.queue_urls["test-lowTraffic"],
        MessageBody='{"v": 1}',
        MessageAttributes={"JobType": {"DataType": "String", "StringValue": job_type}},
    )


def test_on_a_shared_queue_a_type_means_only_its_own_dead_letters(stack: LocalStack, jobkit: Cli) -> None:
    # Given the lowTraffic DLQ holding a dead rare job and a poison message claiming to be rarer
    rare = JobSpecification("rare")
    stack.queue_group().push(rare)
    push_poison(stack, "rarer")
    stack.drain()
    assert stack.queue_depth("lowTraffic", dlq=True) == 2
    assert [m["job_id"] for m in as_json(jobkit, "dlq", "list", "rare")["messages"]] == [rare.id]
    assert as_json(jobkit, "dlq", "list", "rarer")["messages"] == []
    listed = as_json(jobkit, "dlq", "list", "lowTraffic")["messages"]
    assert {(m["type"], m["claimed_type"]) for m in listed} == {("rare", None), (None, "rarer")}
    # When purging rare is declined, nothing goes; the prompt says what stays
    declined = jobkit("dlq", "purge", "rare", input="n\n", ok=False)
    assert declined.exit_code == 1 and "shared with rarer" in declined.output and "other types" in declined.output
    assert stack.queue_depth("lowTraffic", dlq=True) == 2
    # When it is confirmed, only rare's dead letter goes
    purged = as_json(jobkit, "dlq", "purge", "rare", "--yes")
    [rare_message] = [m["message_id"] for m in listed if m["job_id"] == rare.id]
    assert purged == {
        "mode": "delete",
        "dlq": "test-lowTraffic-dlq",
        "removed": 1,
        "job_ids": [rare.id],
        "message_ids": [rare_message],
    }
    assert [m["claimed_type"] for m in as_json(jobkit, "dlq", "list", "lowTraffic")["messages"]] == ["rarer"]


def test_purge_empties_the_dlq(stack: LocalStack, jobkit: Cli) -> None:
    dead_buggy_jobs(stack, A="parser crashed", B="parser crashed", C="parser crashed")
    purged = as_json(jobkit, "dlq", "purge", "buggy", "--yes")
    assert (purged["mode"], purged["removed"]) == ("purge_queue", 3)
    assert stack.queue_depth("buggy", dlq=True) == 0
    push_poison(stack, "rarer")
    stack.drain()
    assert "test-lowTraffic-dlq (types rare, rarer" in jobkit("dlq", "purge", "lowTraffic", input="y\n").output
    assert stack.queue_depth("lowTraffic", dlq=True) == 0


def test_delete_removes_one_dead_letter_after_confirmation(stack: LocalStack, jobkit: Cli) -> None:
    specs = dead_buggy_jobs(stack, A="parser crashed", B="parser crashed")
    assert jobkit("dlq", "delete", "buggy", specs["A"].id, input="n\n", ok=False).exit_code == 1
    assert stack.queue_depth("buggy", dlq=True) == 2
    deleted = as_json(jobkit, "dlq", "delete", "buggy", specs["A"].id, "--yes")
    assert deleted["job_ids"] == [specs["A"].id]
    assert [m["job_id"] for m in as_json(jobkit, "dlq", "list", "buggy")["messages"]] == [specs["B"].id]
    assert jobkit("dlq", "delete", "buggy", specs["A"].id, "--yes", ok=False).exit_code == 1


def test_bad_targets_and_prefixes_are_clear_errors(stack: LocalStack, jobkit: Cli) -> None:
    unknown = jobkit("dlq", "list", "nope", ok=False)
    assert unknown.exit_code == 1 and "'nope' is neither a job type nor a queue" in unknown.output
    assert "lowTraffic" in unknown.output
    wrong_stage = jobkit("dlq", "list", "noop", "--prefix", "prod", ok=False)
    assert wrong_stage.exit_code == 1 and "is the prefix right?" in wrong_stage.output


def test_the_message_id_the_runner_printed_finds_its_dlq_copy(stack: LocalStack, jobkit: Cli) -> None:
    # Given an unreadable message, whose ID the runner logs (and `jobkit local up` prints)
    sent = stack.sqs.send_message(QueueUrl=stack.queue_urls["test-noop"], MessageBody="{not json")
    stack.drain()
    [result] = [r for r in stack.results.results if r.outcome is Outcome.POISONED]
    assert result.message_id == sent["MessageId"]
    # Then its DLQ copy has an ID of its own, and carries the original's
    [dead] = as_json(jobkit, "dlq", "list", "noop")["messages"]
    assert dead["message_id"] != sent["MessageId"] and dead["original_message_id"] == sent["MessageId"]
    # And either ID shows it, or deletes it
    for wanted in (sent["MessageId"], dead["message_id"]):
        [shown] = as_json(jobkit, "dlq", "show", "noop", wanted)["messages"]
        assert shown["message_id"] == dead["message_id"]
    assert f"copy of {sent['MessageId']}" in " ".join(jobkit("dlq", "show", "noop", sent["MessageId"]).stdout.split())
    assert jobkit("dlq", "delete", "noop", sent["MessageId"], "--yes").exit_code == 0
    assert as_json(jobkit, "dlq", "list", "noop")["messages"] == []


def test_a_dead_letter_selected_by_message_ids_alone_is_not_taken_by_a_claimed_original_id(
    stack: LocalStack,
) -> None:
    from jobkit.ops import resolve_scope as scope_of
    from jobkit.ops.dead_letters import dead_letter

    # A message that SQS's redrive policy moved keeps its sender's attributes, so
    # a sender could claim another message's ID as its original
    def message(body: str) -> dict[str, Any]:
        claimed = {"jobkit.reason": "poison", "jobkit.messageId": "m-picked"}
        attributes = {name: {"DataType": "String", "StringValue": value} for name, value in claimed.items()}
        return {"MessageId": "m-own", "ReceiptHandle": "r", "Body": body, "MessageAttributes": attributes}

    scope = scope_of(stack.declaration, "noop")
    job = dead_letter(message(JobSpecification("noop").stamped(1.0).to_message()))
    assert job.original_message_id is None and not job.selected(scope, ["m-picked"])  # a job: by its job ID only
    junk = dead_letter(message("not a job"))
    assert junk.original_message_id == "m-picked" and junk.selected(scope, ["m-picked"])
    assert not junk.selected(scope, ["m-picked"], message_ids_only=True)  # to act on picked messages: never


def test_a_jobs_dlq_copy_keeps_its_senders_trace_context(stack: LocalStack) -> None:
    spec = JobSpecification("permanent").stamped(stack.clock.now())
    sent = {
        "JobType": "permanent",
        "CorrelationId": "req-1",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    }
    stack.sqs.send_message(
        QueueUrl=stack.queue_urls["test-permanent"],
        MessageBody=spec.to_message(),
        MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in sent.items()},
    )
    stack.drain()
    [dead] = stack.dead_letters("permanent")
    kept = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items() if k in sent}
    assert kept == sent and "jobkit.messageId" not in dead["MessageAttributes"]
