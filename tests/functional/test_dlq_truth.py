"""The DLQ tools tell only what they can verify, and survive any body.

- A reason comes from the runner's records in the jobs table, or from the
  tool's own check of the body; the ``jobkit.*`` attributes a message carries
  (any sender may set them) are shown as unverified claims.
- On a shared queue, the body's type decides which type a message belongs to,
  never the ``JobType`` attribute; a message that is not a job belongs to no
  type, and its message ID selects it in any scope of its DLQ.
- Every command works on a DLQ holding hostile bodies: nesting 10,000 deep, a
  lone surrogate, a 400-digit number, text that is not JSON.

On the local stack (moto), through the CLI, with the stack's frozen clock.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from ops_cli import Cli, cli_for

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.local import LocalStack
from jobkit.sqs import string_attribute

from conftest import START
from faults import FailCalls
from testjobs import HOOKS, SimulatedCrash


@pytest.fixture
def jobkit(stack: LocalStack) -> Cli:
    return cli_for(stack)


def _no_constants(name: str) -> Any:
    raise AssertionError(f"{name} in --json output: not JSON")


def as_json(jobkit: Cli, *args: str) -> Any:
    """The command's --json output, which must be strict JSON."""
    return json.loads(jobkit(*args, "--json").stdout, parse_constant=_no_constants)


def listed(jobkit: Cli, target: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = as_json(jobkit, "dlq", "list", target)["messages"]
    return messages


def forged(**claims: str) -> dict[str, dict[str, str]]:
    """Message attributes that say what the runner says when it dead-letters."""
    names = {"reason": "jobkit.reason", "error_class": "jobkit.errorClass", "error": "jobkit.error"}
    attributes = {names[k]: string_attribute(v) for k, v in claims.items() if k in names}
    if "attempts" in claims:
        attributes["jobkit.attempts"] = {"DataType": "Number", "StringValue": claims["attempts"]}
    return attributes


def send(stack: LocalStack, queue: str, body: str, *, dlq: bool = False, **attributes: Any) -> str:
    response = stack.sqs.send_message(
        QueueUrl=stack.queue_url(queue, dlq=dlq), MessageBody=body, MessageAttributes=attributes
    )
    return str(response["MessageId"])


def job_type(name: str) -> dict[str, str]:
    return string_attribute(name)


def crash_receives(stack: LocalStack, queue: str, times: int) -> None:
    """A runner that receives the message and dies before answering, ``times``
    times; then SQS's redrive policy moves it to the DLQ on the next receive."""
    url = stack.queue_url(queue)
    wait = stack.declaration.queues[queue].visibility_timeout_s + 60
    for _ in range(times):
        stack.clock.advance(wait)
        assert stack.sqs.receive_message(QueueUrl=url)["Messages"]
    stack.clock.advance(wait)
    assert "Messages" not in stack.sqs.receive_message(QueueUrl=url)
    assert stack.queue_depth(queue, dlq=True) >= 1


# -- A: the reason is verified -----------------------------------------------------------------------


def test_forged_dead_letter_attributes_are_shown_as_claims_never_as_the_reason(stack: LocalStack, jobkit: Cli) -> None:
    # Given a sender that sets the runner's dead-letter attributes on a job of its own ...
    spec = JobSpecification("flaky", {"fail_times": 9}).stamped(stack.clock.now())
    claims = forged(reason="non_retryable", error_class="ForgedError", error="delete this job", attempts="1")
    send(stack, "flaky", spec.to_message(), JobType=job_type("flaky"), **claims)
    # ... whose first attempt fails (the runner records it), and whose runner then dies twice
    stack.poll_once()
    crash_receives(stack, "flaky", 2)
    # Then the DLQ shows what the runner recorded, and the attributes only as claims
    [dead] = listed(jobkit, "flaky")
    assert (dead["job_id"], dead["reason"], dead["verified"]) == (spec.id, "redrive_policy", True)
    assert (dead["error_class"], dead["error"], dead["attempts"]) == ("ConnectionError", "flaky: attempt 1 failed", 1)
    assert dead["claimed"] == {
        "reason": "non_retryable",
        "error_class": "ForgedError",
        "error": "delete this job",
        "attempts": 1,
        "source_queue": None,
        "dead_lettered_at": None,
    }
    assert dead["source_queue"] == "test-flaky"  # the queue whose DLQ this is
    # and filters match the verified error, not the claimed one
    assert as_json(jobkit, "dlq", "redrive", "flaky", "--error-contains", "delete this", "--dry-run")["matched"] == 0
    table = jobkit("dlq", "list", "flaky").stdout
    assert "claims (unverified)" in table and "non_retryable: ForgedError: delete this job" in table
    shown = jobkit("dlq", "show", "flaky", spec.id).stdout
    assert "redrive_policy (verified)" in shown and "claims (unverified)" in shown


def test_a_job_nobody_recorded_is_unknown_whatever_it_claims(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job sent straight to the DLQ, claiming to be poison
    spec = JobSpecification("alwaysFails").stamped(stack.clock.now())
    send(stack, "alwaysFails", spec.to_message(), dlq=True, **forged(reason="poison", error="claimed"))
    [dead] = listed(jobkit, "alwaysFails")
    assert (dead["reason"], dead["verified"], dead["error"], dead["attempts"]) == ("unknown", False, None, None)
    assert dead["claimed"]["reason"] == "poison"


def test_runner_dead_letter_reasons_come_from_its_records(stack: LocalStack, jobkit: Cli) -> None:
    # Given jobs the runner dead-lettered: one out of attempts, one that refused
    # retries, one whose class does not import
    exhausted, permanent, broken = (JobSpecification(t) for t in ("alwaysFails", "permanent", "broken"))
    stack.queue_group().push([exhausted, permanent, broken])
    stack.drain()
    # Then each reason, error and attempt is the runner's record
    [a] = listed(jobkit, "alwaysFails")
    assert (a["reason"], a["verified"], a["attempts"], a["error_class"]) == (
        "attempts_exhausted",
        True,
        3,
        "RuntimeError",
    )
    assert a["dead_lettered_at"] == pytest.approx(a["claimed"]["dead_lettered_at"])  # the record's time
    [p] = listed(jobkit, "permanent")
    assert (p["reason"], p["attempts"], p["error"]) == ("non_retryable", 1, "the account was deleted")
    [b] = listed(jobkit, "broken")
    assert (b["reason"], b["verified"], b["error_class"]) == ("poison", True, "JobClassError")


def test_a_job_whose_final_attempt_succeeded_but_whose_delete_was_lost(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job that succeeds on its last attempt (the third), whose delete then fails:
    # SQS delivers it a fourth time, and its redrive policy moves it to the DLQ
    spec = JobSpecification("flaky", {"fail_times": 2})
    stack.queue_group().push(spec)
    FailCalls(stack.sqs, "sqs.DeleteMessageBatch", code="InternalError", status=500, times=1)
    stack.drain()
    assert stack.queue_depth("flaky", dlq=True) == 1
    # Then the DLQ says it succeeded, not that it failed
    [dead] = listed(jobkit, "flaky")
    assert (dead["reason"], dead["verified"], dead["attempts"], dead["error"]) == (
        "succeeded_delete_lost",
        True,
        3,
        None,
    )
    assert dead["explanation"] == "succeeded on its last attempt; its delete was lost"
    [shown] = as_json(jobkit, "dlq", "show", "flaky", spec.id)["messages"]
    assert shown["final_attempt"]["attempt"] == 3 and shown["final_attempt"]["succeeded_at"] is not None


def die() -> None:
    raise SimulatedCrash("the invocation", 0)


def test_a_job_whose_every_attempt_timed_out(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job still running at each attempt's Lambda deadline: the watchdog
    # records the timeout, then Lambda stops the invocation
    spec = JobSpecification("tracked", {"result": 1})
    stack.queue_group().push(spec)

    def time_out() -> None:
        stack.clock.advance(stack.declaration.types["tracked"].timeout_s - 1)
        die()

    wait = stack.declaration.queues["tracked"].visibility_timeout_s + 1
    for _ in range(3):
        HOOKS.append(time_out)
        with pytest.raises(SimulatedCrash):
            stack.poll_once()
        stack.clock.advance(wait)
    assert stack.poll_once() == 0  # the fourth receive: SQS moves it to the DLQ
    # Then it timed out, on its last attempt
    [dead] = listed(jobkit, "tracked")
    assert (dead["reason"], dead["verified"], dead["attempts"], dead["error_class"]) == (
        "timed_out",
        True,
        3,
        "JobTimedOut",
    )
    assert dead["explanation"] == "no attempt finished: timed out"


def test_a_job_whose_final_attempt_never_reported(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job that fails twice, then dies without a word on its final attempt
    spec = JobSpecification("hooked", {"page": "X"})
    stack.queue_group().push(spec)
    HOOKS.extend([lambda: False, lambda: False, die])
    with pytest.raises(SimulatedCrash):
        stack.drain()
    stack.clock.advance(stack.declaration.queues["hooked"].visibility_timeout_s + 1)
    assert stack.poll_once() == 0  # the fourth receive: SQS moves it to the DLQ
    # Then the DLQ says its last attempt never finished, not the earlier failure
    [dead] = listed(jobkit, "hooked")
    assert (dead["reason"], dead["verified"], dead["attempts"]) == ("no_attempt_finished", True, 3)
    assert "no attempt reported back" in dead["explanation"] and "crashed" in dead["explanation"]


def test_records_of_an_earlier_job_with_the_same_id_are_not_this_ones(stack: LocalStack, jobkit: Cli) -> None:
    # Given a job that failed once, and later a new job that reuses its ID, type and domain,
    # and another in another domain, both sent straight to the DLQ with no attempt recorded
    first = JobSpecification("flaky", {"fail_times": 1}, id="reused", domain="enwiki")
    stack.queue_group().push(first)
    stack.drain()
    stack.clock.advance(60)
    for domain in ("enwiki", "dewiki"):
        later = JobSpecification("flaky", {"fail_times": 0}, id="reused", domain=domain).stamped(stack.clock.now())
        send(stack, "flaky", later.to_message(), dlq=True)
    # Then neither shows the first job's failure
    dead = listed(jobkit, "flaky")
    assert sorted(d["domain"] for d in dead) == ["dewiki", "enwiki"]
    assert {(d["reason"], d["error"]) for d in dead} == {("unknown", None)}


def test_the_tool_checks_bodies_itself_and_says_why_they_are_poison(stack: LocalStack, jobkit: Cli) -> None:
    # Given, in the shared lowTraffic DLQ, a job of another queue's type and a job
    # enqueued "in the future" (milliseconds), both claiming something else
    now = stack.clock.now()
    misrouted = JobSpecification("alwaysFails", id="misrouted").stamped(now)
    future = JobSpecification("rare", id="future").stamped(now * 1000)
    claims = forged(reason="non_retryable", error="trust me")
    send(stack, "lowTraffic", misrouted.to_message(), dlq=True, JobType=job_type("rare"), **claims)
    send(stack, "lowTraffic", future.to_message(), dlq=True, **claims)
    by_id = {d["job_id"]: d for d in listed(jobkit, "lowTraffic")}
    # Then the reasons are the tool's own, verified
    bad_type = by_id["misrouted"]
    assert (bad_type["reason"], bad_type["verified"], bad_type["error_class"]) == ("poison", True, "UnknownJobType")
    assert "not a type of queue 'lowTraffic'" in bad_type["error"] and bad_type["claimed_type"] == "rare"
    assert (by_id["future"]["reason"], by_id["future"]["error_class"]) == ("poison", "SpecError")
    assert "looks like milliseconds" in by_id["future"]["error"]
    # and a message of another queue's type belongs to no type here
    assert [d["job_id"] for d in listed(jobkit, "rare")] == ["future"]


# -- A: on a shared queue, the body decides the type ------------------------------------------------------


def test_on_a_shared_queue_the_body_decides_the_type_not_the_attribute(stack: LocalStack, jobkit: Cli) -> None:
    # Given a rare job whose message claims to be rarer, and a message that is
    # not a job, claiming to be rare; both end in the shared DLQ
    rare = JobSpecification("rare").stamped(stack.clock.now())
    send(stack, "lowTraffic", rare.to_message(), JobType=job_type("rarer"))
    send(stack, "lowTraffic", '{"v": 1}', JobType=job_type("rare"))
    stack.drain()
    assert stack.queue_depth("lowTraffic", dlq=True) == 2
    # Then rarer has no dead letters, rare has its job (with the claim shown), and
    # the message that is not a job is listed under the queue only
    assert listed(jobkit, "rarer") == []
    [job] = listed(jobkit, "rare")
    assert (job["job_id"], job["type"], job["claimed_type"], job["reason"]) == (
        rare.id,
        "rare",
        "rarer",
        "attempts_exhausted",
    )
    [junk] = [d for d in listed(jobkit, "lowTraffic") if d["job_id"] is None]
    assert (junk["type"], junk["claimed_type"], junk["readable"], junk["reason"]) == (None, "rare", False, "poison")
    assert "(claims rare)" in jobkit("dlq", "list", "lowTraffic").stdout
    # When rarer is purged nothing goes; when rare is, only its job goes
    assert as_json(jobkit, "dlq", "purge", "rarer", "--yes")["removed"] == 0
    assert as_json(jobkit, "dlq", "purge", "rare", "--yes")["job_ids"] == [rare.id]
    assert stack.queue_depth("lowTraffic", dlq=True) == 1
    # And its message ID selects the message that is not a job in any scope
    [shown] = as_json(jobkit, "dlq", "show", "rare", junk["message_id"])["messages"]
    assert shown["body"] == {"v": 1}
    moved = as_json(jobkit, "dlq", "redrive", "rare", "--id", junk["message_id"])
    assert (moved["moved"], moved["message_ids"]) == (1, [junk["message_id"]])
    stack.drain()  # poison again, and back in the DLQ as a new message
    [again] = listed(jobkit, "lowTraffic")
    deleted = as_json(jobkit, "dlq", "delete", "rarer", again["message_id"], "--yes")
    assert (deleted["removed"], deleted["job_ids"]) == (1, [None])
    assert stack.queue_depth("lowTraffic", dlq=True) == 0


# -- B: any body --------------------------------------------------------------------------------------------


def wire(job_id: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": job_id, "type": "rare", "params": {}, "enqueuedAt": START, **fields}


def nested(depth: int) -> str:
    return json.dumps(wire("deep")).replace('"params": {}', '"params": {"a": ' + "[" * depth + "]" * depth + "}")


#: name -> (body, a phrase of the tool's error; None: the body is a job)
HOSTILE: dict[str, tuple[str, str | None]] = {
    "nested 10,000 deep": (nested(10_000), "nests too deeply"),
    # A lone surrogate can only come as a JSON escape: the body itself is ASCII, as SQS needs.
    "lone surrogate": (json.dumps(wire("surrogate", params={"x": "\ud800"})), "lone UTF-16 surrogate"),
    "lone surrogate as the id": (json.dumps(wire("\udc00")), "lone UTF-16 surrogate"),
    "400-digit number": (json.dumps(wire("digits", enqueuedAt=10**400)), "field 'enqueuedAt'"),
    "not JSON": ("{this is not json", "not valid JSON"),
    "a key given twice": (json.dumps(wire("twice")).replace('"v": 1', '"v": 1, "v": 1'), "twice"),
    # json would read 1e400 as infinity, which no JSON writer can send on: poison, as for the runner
    "number beyond a float": (
        json.dumps(wire("infinite")).replace('"params": {}', '"params": {"x": 1e400}'),
        "too large for a double",
    ),
}


def test_every_dlq_command_survives_any_body(stack: LocalStack, jobkit: Cli) -> None:
    # Given the shared DLQ holding a rare job the runner dead-lettered ...
    normal = JobSpecification("rare")
    stack.queue_group().push(normal)
    stack.drain()
    # ... and hostile bodies put straight into it, each claiming to be rare. moto takes
    # them all, as SQS would: each is valid Unicode text. One also carries a forged
    # 400-digit jobkit.attempts, which SQS would refuse (Number attributes have at most
    # 38 digits) and moto takes: the tools must survive it anyway.
    ids = {
        name: send(stack, "lowTraffic", body, dlq=True, JobType=job_type("rare")) for name, (body, _) in HOSTILE.items()
    }
    ids["forged digits"] = send(
        stack,
        "lowTraffic",
        "x",
        dlq=True,
        **forged(attempts="9" * 400),
        **{"jobkit.deadLetteredAt": {"DataType": "Number", "StringValue": "9" * 400}},
    )
    # Then the whole DLQ lists, as JSON and as a table: the hostile ones as
    # unreadable, by message ID, poison by the tool's own parse
    by_message = {d["message_id"]: d for d in listed(jobkit, "lowTraffic")}
    assert len(by_message) == len(HOSTILE) + 2
    for name, (_, phrase) in HOSTILE.items():
        dead = by_message[ids[name]]
        assert (dead["readable"], dead["job_id"], dead["type"], dead["claimed_type"]) == (False, None, None, "rare")
        assert (dead["reason"], dead["verified"], dead["error_class"]) == ("poison", True, "SpecError"), name
        assert phrase in dead["error"], (name, dead["error"])
    assert by_message[ids["forged digits"]]["claimed"]["attempts"] is None
    table = jobkit("dlq", "list", "lowTraffic").stdout
    assert all(f"unreadable: message {ids[name]}" in table for name, (_, p) in HOSTILE.items() if p)
    # and each one shows, as JSON and as text
    for message_id in ids.values():
        [shown] = as_json(jobkit, "dlq", "show", "lowTraffic", message_id)["messages"]
        assert isinstance(shown["body"], str) or shown["body"]["id"] != "infinite"
        jobkit("dlq", "show", "rare", message_id)  # its message ID selects it in a type's scope too
    # The type's scope holds its jobs only: the one the runner dead-lettered and the valid one
    assert {d["job_id"] for d in listed(jobkit, "rare")} == {normal.id}
    # A verified error finds a hostile one to redrive; a message ID finds another
    redriven = as_json(jobkit, "dlq", "redrive", "lowTraffic", "--error-contains", "nests too deeply")
    assert redriven["message_ids"] == [ids["nested 10,000 deep"]]
    assert as_json(jobkit, "dlq", "redrive", "rare", "--id", ids["lone surrogate"])["moved"] == 1
    assert stack.queue_depth("lowTraffic") == 2
    # Purging the type removes its jobs and leaves the rest
    purged = as_json(jobkit, "dlq", "purge", "rare", "--yes")
    assert set(purged["job_ids"]) == {normal.id}
    # Each of the rest is deleted by its message ID, in the type's scope
    rest = [ids[n] for n in (*HOSTILE, "forged digits") if n not in ("nested 10,000 deep", "lone surrogate")]
    for message_id in rest:
        assert as_json(jobkit, "dlq", "delete", "rare", message_id, "--yes")["message_ids"] == [message_id]
    assert stack.queue_depth("lowTraffic", dlq=True) == 0


# -- found by adversarial testing -------------------------------------------------------------------


def test_a_runner_copy_whose_dead_letter_record_was_lost_is_unknown_not_a_false_reason(
    stack: LocalStack, jobkit: Cli
) -> None:
    # Given the one write that says why a job was dead-lettered throttled away
    fault = FailCalls(
        stack.dynamodb,
        "dynamodb.PutItem",
        code="ThrottlingException",
        times=1,
        match=lambda params: "dead_letter_reason" in params.get("Item", {}),
    )
    stack.queue_group().push(JobSpecification("alwaysFails"))
    stack.drain()
    assert fault.failed_calls == 1
    # Then the DLQ does not say "no attempt reported back": it cannot know, and says so
    [dead] = listed(jobkit, "alwaysFails")
    assert (dead["reason"], dead["verified"]) == ("unknown", False)
    assert "does not confirm" in dead["explanation"] and dead["claimed"]["reason"] == "attempts_exhausted"


def test_a_redriven_job_that_sqs_moved_back_unrun_is_not_shown_with_its_old_reason(
    stack: LocalStack, jobkit: Cli
) -> None:
    # Given a job dead-lettered for a bug, redriven an hour later, whose runner then
    # dies on every receive before reaching it (SQS's redrive policy moves it back)
    stack.queue_group().push(JobSpecification("alwaysFails", {"why": "old bug"}))
    stack.drain()
    [dead] = listed(jobkit, "alwaysFails")
    assert dead["reason"] == "attempts_exhausted"
    stack.clock.advance(3600)
    jobkit("dlq", "redrive", "alwaysFails")
    crash_receives(stack, "alwaysFails", 3)
    # Then the old dead-letter record does not explain this message
    [dead] = listed(jobkit, "alwaysFails")
    assert dead["reason"] != "attempts_exhausted" and not dead["verified"], dead


def test_an_operator_whose_clock_is_slow_sees_the_runners_reason_not_poison(stack: LocalStack) -> None:
    stack.queue_group().push(JobSpecification("permanent"))
    stack.drain()
    stack.clock.advance(10)
    laptop = cli_for(stack, operator_clock=VirtualClock(stack.clock.now() - 360))  # six minutes slow
    [dead] = listed(laptop, "permanent")
    assert (dead["reason"], dead["verified"]) == ("non_retryable", True)
