"""A corpus of bad input: each message ends in the DLQ with a clear reason,
alone, while the rest of its batch runs; each bad spec is refused at push
time with an error that names the job.

What can arrive: SQS carries only valid Unicode text (the XML character
ranges: no NUL, no unpaired surrogate, at most 1 MiB with the attributes).
Inside that, anything goes: text that is not JSON, JSON that breaks the wire
schema, nesting deep enough to blow Python's recursion limit, numbers JSON
does not have (NaN), and ``\\ud800``-style escapes that decode to a lone
surrogate, which is not Unicode text at all. A hand-made event (a direct
``lambda:InvokeFunction``) can carry anything, even a body over 1 MiB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from jobkit import JobQueueGroup, JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobQueueError, SpecError
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration
from jobkit.local import LocalStack
from jobkit.local.esm import sqs_event
from jobkit.payloads.reference import MAX_PARAMS_BYTES, params_bytes
from jobkit.records.keys import JobRef
from jobkit.sqs import MAX_JOB_BYTES, MAX_MESSAGE_BYTES, message_size, string_attribute
from jobkit.wiring import Wiring

from conftest import START
from faults import EnforceSqsSizeLimit
from testjobs import RUNS

ARN = "arn:aws:sqs:us-east-1:123456789012:test-noop"


SIG = "a" * 40


def wire(**fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": "bad-1", "type": "noop", "params": {}, "enqueuedAt": START, **fields}


def text(**fields: Any) -> str:
    return json.dumps(wire(**fields))


def without(field: str, **fields: Any) -> str:
    data = wire(**fields)
    del data[field]
    return json.dumps(data)


def nested(depth: int) -> str:
    return text().replace('"params": {}', '"params": {"a": ' + "[" * depth + "]" * depth + "}")


#: name -> (body, the error class in jobkit.errorClass, a phrase the error must contain)
CORPUS: dict[str, tuple[str, str, str]] = {
    "empty": ("", "SpecError", "not valid JSON"),
    "whitespace": ("  \n\t ", "SpecError", "not valid JSON"),
    "not json": ("{this is not json", "SpecError", "not valid JSON"),
    "truncated json": (text()[:-5], "SpecError", "not valid JSON"),
    "byte order mark": ("\ufeff" + text(), "SpecError", "not valid JSON"),
    "json null": ("null", "SpecError", "must be a JSON object"),
    "json array": ("[1, 2]", "SpecError", "must be a JSON object"),
    "json string": ('"noop"', "SpecError", "must be a JSON object"),
    "wrong version": (text(v=0), "SpecError", "unsupported wire version 0"),
    "version as text": (text(v="1"), "SpecError", "unsupported wire version '1'"),
    "version as boolean": (text(v=True), "SpecError", "unsupported wire version True"),
    "no version": (without("v"), "SpecError", "unsupported wire version None"),
    "no id": (without("id"), "SpecError", "missing required field(s): id"),
    "no type": (without("type"), "SpecError", "missing required field(s): type"),
    "no params": (without("params"), "SpecError", "missing required field(s): params"),
    "no enqueuedAt": (without("enqueuedAt"), "SpecError", "missing required field(s): enqueuedAt"),
    "newer major version": (text(v=4, traceId="t"), "SpecError", "is newer than this runner reads (v3)"),
    "v3 with its params inline": (text(v=3), "SpecError", "'params' and 'paramsRef' both given"),
    "v3 without a reference": (without("params", v=3), "SpecError", "field 'paramsRef' must be an object"),
    "field name not an identifier": (text(**{"os:system": "x"}), "SpecError", "not identifiers: 'os:system'"),
    "id as number": (text(id=7), "SpecError", "field 'id'"),
    "id with a slash": (text(id="../x"), "SpecError", "field 'id'"),
    "type as list": (text(type=["noop"]), "SpecError", "field 'type'"),
    "params as list": (text(params=[1]), "SpecError", "field 'params' must be an object, got list"),
    "params as text": (text(params="p"), "SpecError", "field 'params' must be an object, got str"),
    "enqueuedAt as text": (text(enqueuedAt="yesterday"), "SpecError", "field 'enqueuedAt'"),
    "enqueuedAt negative": (text(enqueuedAt=-1), "SpecError", "field 'enqueuedAt'"),
    "empty domain": (text(domain=""), "SpecError", "field 'domain'"),
    "domain too long": (text(domain="d" * 256), "SpecError", "field 'domain'"),
    "releaseAt as text": (text(releaseAt="soon"), "SpecError", "field 'releaseAt'"),
    "removeDuplicates as text": (text(removeDuplicates="yes"), "SpecError", "field 'removeDuplicates'"),
    "ignore params not strings": (text(removeDuplicatesIgnoreParams=[1]), "SpecError", "removeDuplicatesIgnore"),
    "priorAttempts negative": (text(priorAttempts=-1), "SpecError", "field 'priorAttempts'"),
    "priorAttempts fractional": (text(priorAttempts=1.5), "SpecError", "field 'priorAttempts'"),
    "bad root signature": (text(params={"rootJobSignature": "x"}), "SpecError", "rootJobSignature"),
    "bad root timestamp": (text(params={"rootJobSignature": SIG, "rootJobTimestamp": "now"}), "SpecError", "rootJob"),
    "null root timestamp": (
        text(params={"rootJobSignature": SIG, "rootJobTimestamp": None}),
        "SpecError",
        "params.rootJobTimestamp must be epoch seconds next to params.rootJobSignature, got None",
    ),
    "root timestamp without a signature": (
        text(params={"rootJobTimestamp": START}),
        "SpecError",
        "params.rootJobSignature must be 40 lowercase hex digits",
    ),
    "root timestamp of 400 digits": (
        text(params={"rootJobSignature": SIG, "rootJobTimestamp": 10**400}),
        "SpecError",
        "params.rootJobTimestamp must be epoch seconds",
    ),
    "enqueuedAt of 400 digits": (text(enqueuedAt=10**400), "SpecError", "field 'enqueuedAt' must be epoch seconds"),
    "root timestamp an hour ahead": (
        text(params={"rootJobSignature": SIG, "rootJobTimestamp": START + 3600}),
        "SpecError",
        "rootJobTimestamp is 3,600 s ahead of this clock",
    ),
    "root timestamp in milliseconds": (
        text(params={"rootJobSignature": SIG, "rootJobTimestamp": START * 1000}),
        "SpecError",
        "looks like milliseconds",
    ),
    "enqueuedAt in milliseconds": (text(enqueuedAt=START * 1000), "SpecError", "enqueuedAt is"),
    "root timestamp as MediaWiki writes it": (
        text(params={"rootJobSignature": SIG, "rootJobTimestamp": 20270115080000}),
        "SpecError",
        "looks like a MediaWiki timestamp, YYYYMMDDHHMMSS, for 2027-01-15T08:00:00Z: the wire format counts"
        " epoch seconds, 1800000000",
    ),
    "releaseAt in milliseconds": (text(releaseAt=START * 1000), "SpecError", "releaseAt is"),
    "type given twice": (
        text().replace('"type": "noop"', '"type": "noop", "type": "alwaysFails"'),
        "SpecError",
        "the key 'type' twice",
    ),
    "a key given twice in params": (
        text().replace('"params": {}', '"params": {"a": 1, "a": 2}'),
        "SpecError",
        "the key 'a' twice",
    ),
    "bad root flag": (text(params={"rootJobIsSelf": "yes"}), "SpecError", "rootJobIsSelf"),
    "unknown type": (text(type="nope"), "UnknownJobType", "unknown job type 'nope'"),
    "type naming a module": (text(type="os"), "UnknownJobType", "unknown job type 'os'"),
    "type naming a module path": (text(type="os:system"), "SpecError", "field 'type'"),
    "type naming a declared class": (text(type="testjobs:NoopJob"), "SpecError", "field 'type'"),
    "a type of another queue": (
        text(type="alwaysFails"),
        "UnknownJobType",
        "unknown job type 'alwaysFails': not a type of this runner's queue (queue 'noop' serves noop)",
    ),
    "NaN in params": (text().replace('"params": {}', '"params": {"x": NaN}'), "SpecError", "NaN is not"),
    "Infinity as enqueuedAt": (text().replace(str(START), "Infinity"), "SpecError", "Infinity is not"),
    "integer of 5,000 digits": (
        text().replace('"params": {}', '"params": {"x": ' + "9" * 5000 + "}"),
        "SpecError",
        "not valid JSON",
    ),
    "nested 10,000 deep": (nested(10_000), "SpecError", "nests too deeply"),
    "nested 100,000 deep": (nested(100_000), "SpecError", "nests too deeply"),
    "lone high surrogate": (text(params={"x": "\ud800"}), "SpecError", "lone UTF-16 surrogate"),
    "lone low surrogate in a key": (text(params={"\udc00": 1}), "SpecError", "lone UTF-16 surrogate"),
    "surrogates in the wrong order": (text(params={"x": "\udc00\ud800"}), "SpecError", "lone UTF-16 surrogate"),
    "lone surrogate in the domain": (text(domain="\ud83d"), "SpecError", "lone UTF-16 surrogate"),
}


@pytest.fixture(scope="module")
def corpus_stack(test_declaration: Declaration) -> Iterator[LocalStack]:
    # One stack for the corpus: each case cleans up after itself. SQS's size rule
    # counts attributes too, as AWS does (moto counts the body only).
    with LocalStack(test_declaration, clock=VirtualClock(START), seed=1) as local:
        local.size_rule = EnforceSqsSizeLimit(local.sqs)  # type: ignore[attr-defined]
        yield local


def delete(stack: LocalStack, url: str, messages: list[dict[str, Any]]) -> None:
    """Deletes what the event source mapping would have deleted after the batch."""
    for message in messages:
        stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def receive(stack: LocalStack, url: str, count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        batch = stack.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(10, count - len(messages)),
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        assert batch, f"expected {count} messages, got {len(messages)}"
        messages.extend(batch)
    return messages


def run_batch_with(stack: LocalStack, body: str) -> tuple[list[Any], dict[str, Any], list[JobSpecification]]:
    """Sends 9 good jobs around one bad body, has the runner take all 10 in one
    batch, and returns the results, the dead letter and the good specs."""
    url = stack.queue_urls["test-noop"]
    dlq = stack.queue_urls["test-noop-dlq"]
    RUNS.clear()
    stack.results.clear()
    good = [JobSpecification("noop", {"n": n}) for n in range(9)]
    stack.queue_group().push(good[:4])
    stack.sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={"JobType": string_attribute("noop")})
    stack.queue_group().push(good[4:])
    messages = receive(stack, url, 10)
    response = stack.runners["noop"].handle(sqs_event(messages, ARN), None)
    assert response == {"batchItemFailures": []}
    delete(stack, url, [m for m in messages if m["Body"] != body])
    stack.clock.advance(0.01)  # moto shows a message once the clock has passed its visible_at
    [dead] = stack.dead_letters("noop")
    stack.sqs.delete_message(QueueUrl=dlq, ReceiptHandle=dead["ReceiptHandle"])
    assert stack.queue_depth("noop") == 0
    return stack.results.results, dead, good


@pytest.mark.parametrize("name", CORPUS)
def test_a_bad_message_is_dead_lettered_with_its_reason_alone(corpus_stack: LocalStack, name: str) -> None:
    body, error_class, phrase = CORPUS[name]
    results, dead, good = run_batch_with(corpus_stack, body)
    # The nine good jobs ran; the bad one is in the DLQ, as it came, with the reason
    assert {run_id for _, run_id, event in RUNS if event == "run"} == {s.id for s in good}
    assert [r.outcome for r in results].count(Outcome.SUCCEEDED) == 9
    [poisoned] = [r for r in results if r.outcome is not Outcome.SUCCEEDED]
    assert (poisoned.outcome, poisoned.job_type) == (Outcome.POISONED, "noop")
    assert dead["Body"] == body
    reason = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert reason["jobkit.reason"] == "poison"
    assert reason["jobkit.errorClass"] == error_class
    assert phrase in reason["jobkit.error"], reason["jobkit.error"]
    assert len(reason["jobkit.error"]) < 400  # clear, and never an echo of a huge field
    assert reason["JobType"] == "noop"


def test_a_class_that_does_not_import_is_poison_and_the_runner_says_so_in_its_records(
    corpus_stack: LocalStack,
) -> None:
    # Given a message of a declared type, on its own queue, whose class path does not import
    corpus_stack.sqs.send_message(
        QueueUrl=corpus_stack.queue_url("broken"),
        MessageBody=text(type="broken"),
        MessageAttributes={"JobType": string_attribute("broken")},
    )
    corpus_stack.results.clear()
    corpus_stack.drain()
    # Then it is poison, with the import error, and a failure record the DLQ tools can trust
    [dead] = corpus_stack.dead_letters("broken")
    reason = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert (reason["jobkit.reason"], reason["jobkit.errorClass"]) == ("poison", "JobClassError")
    assert "does not import" in reason["jobkit.error"]
    [record] = corpus_stack.journal().failures(JobRef("broken", None, "bad-1"))
    assert (record.error_class, record.dead_letter_reason) == ("JobClassError", "poison")


def test_big_params_and_odd_but_valid_text_run(corpus_stack: LocalStack) -> None:
    # Not bad at all: params of almost 1 MiB, a valid surrogate pair (as an escape
    # and as the character), control characters escaped, deep but parseable nesting.
    specs = [
        JobSpecification("noop", {"blob": "x" * (MAX_JOB_BYTES - 400)}),
        JobSpecification("noop", {"emoji": "\U0001f600", "tab": "\t", "nul": "\x00"}),
        JobSpecification("noop", {"deep": json.loads("[" * 200 + "]" * 200)}),
    ]
    corpus_stack.results.clear()
    corpus_stack.queue_group().push(specs)
    url = corpus_stack.queue_urls["test-noop"]
    escaped = json.dumps(wire(id="escaped-pair", params={"emoji": "\U0001f600"}))  # ASCII: \ud83d\ude00
    assert "\\ud83d\\ude00" in escaped
    corpus_stack.sqs.send_message(QueueUrl=url, MessageBody=escaped)
    corpus_stack.drain()
    assert corpus_stack.results.outcomes() == {Outcome.SUCCEEDED: 4}


# -- at the size limit -------------------------------------------------------------------------------


def padded(size: int, now: float, job_type: str = "noop") -> JobSpecification:
    """A spec whose message (body and JobType attribute), pushed at ``now``, is exactly ``size`` bytes."""
    spec = JobSpecification(job_type, {"pad": ""})
    stamped = spec.stamped(now)
    base = message_size(stamped.to_message(), {"JobType": string_attribute(job_type)})
    return JobSpecification(job_type, {"pad": "x" * (size - base)}, id=spec.id)


def test_sqs_refuses_a_body_of_1_mib_and_1_byte(corpus_stack: LocalStack) -> None:
    with pytest.raises(ClientError, match="shorter than"):
        corpus_stack.sqs.send_message(QueueUrl=corpus_stack.queue_urls["test-noop"], MessageBody="x" * (2**20 + 1))


def test_push_accepts_exactly_the_job_limit_and_refuses_one_byte_more_naming_the_job(
    corpus_stack: LocalStack,
) -> None:
    # The limit is SQS's 1 MiB less the room the runner needs to re-enqueue a job.
    now = corpus_stack.clock.now()
    at_limit, over = padded(MAX_JOB_BYTES, now), padded(MAX_JOB_BYTES + 1, now)
    fine = JobSpecification("noop")
    with pytest.raises(JobQueueError) as raised:
        without_bucket(corpus_stack).push([at_limit, over, fine])
    [failed] = raised.value.failed
    assert (failed.job_id, failed.job_type, failed.code) == (over.id, "noop", "SpecError")
    assert f"noop {over.id}: message is {MAX_JOB_BYTES + 1} bytes" in failed.message
    assert set(raised.value.enqueued_ids) == {at_limit.id, fine.id}
    corpus_stack.results.clear()
    corpus_stack.drain()
    assert corpus_stack.results.outcomes() == {Outcome.SUCCEEDED: 2}


def test_with_the_bucket_a_job_at_the_limit_stays_inline_and_one_byte_more_goes_there(
    corpus_stack: LocalStack,
) -> None:
    now = corpus_stack.clock.now()
    at_limit, over = padded(MAX_JOB_BYTES, now), padded(MAX_JOB_BYTES + 1, now)
    corpus_stack.queue_group().push([at_limit, over])
    bodies = {
        json.loads(m["Body"])["id"]: json.loads(m["Body"])
        for m in receive(corpus_stack, corpus_stack.queue_urls["test-noop"], 2)
    }
    assert (bodies[at_limit.id]["v"], bodies[over.id]["v"]) == (1, 3)
    assert bodies[over.id]["paramsRef"]["size"] == len(params_bytes(over.params))
    corpus_stack.results.clear()
    corpus_stack.clock.advance(31)  # (received above: visible again)
    corpus_stack.drain()
    assert corpus_stack.results.outcomes() == {Outcome.SUCCEEDED: 2}


def deep(depth: int) -> list[Any]:
    root: list[Any] = []
    level = root
    for _ in range(depth):
        level.append([])
        level = level[0]
    return root


BAD_SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "lone surrogate": ({"x": "\ud800"}, "lone UTF-16 surrogate"),
    "nested 10,000 deep": ({"x": deep(10_000)}, "nest too deeply"),
    "NaN": ({"x": float("nan")}, "not JSON-serialisable"),
    "an object": ({"x": object()}, "not JSON-serialisable"),
    "bytes": ({"x": b"\xff"}, "not JSON-serialisable"),
    "over 1 MiB in UTF-8": ({"x": "\u00e9" * (MAX_MESSAGE_BYTES // 2)}, "a job may have (the SQS limit less"),
    "over the payload bucket's limit": ({"x": "y" * (MAX_PARAMS_BYTES + 1)}, "in the payload bucket"),
}


def without_bucket(stack: LocalStack) -> JobQueueGroup:
    """The push SDK of a producer not given the stack's payload bucket (so a job too large is refused)."""
    return Wiring(stack.declaration, clients=stack.clients, clock=stack.clock, queue_urls=stack.queue_urls).group()


@pytest.mark.parametrize("name", BAD_SPECS)
def test_push_refuses_a_bad_spec_naming_it_and_sends_the_rest(corpus_stack: LocalStack, name: str) -> None:
    params, phrase = BAD_SPECS[name]
    bad, good = JobSpecification("noop", params), JobSpecification("noop", {"ok": True})
    # (over 1 MiB, a job's params go to the payload bucket: this producer has none)
    group = without_bucket(corpus_stack) if name == "over 1 MiB in UTF-8" else corpus_stack.queue_group()
    with pytest.raises(JobQueueError) as raised:
        group.push([bad, good])
    [failed] = raised.value.failed
    assert (failed.job_id, failed.job_type, failed.code) == (bad.id, "noop", "SpecError")
    assert f"noop {bad.id}" in failed.message and phrase in failed.message
    assert raised.value.enqueued_ids == (good.id,)
    corpus_stack.drain()


@pytest.mark.parametrize(
    ("make", "phrase"),
    [
        (lambda: JobSpecification("os:system"), "job type must be a name"),
        (lambda: JobSpecification("noop", ["not", "a", "mapping"]), "noop: params must be a mapping"),  # type: ignore[arg-type]
        (lambda: JobSpecification("noop", {1: "x"}), "noop: params must be a mapping with string keys"),  # type: ignore[dict-item]
        (lambda: JobSpecification("noop", delay=-1), "noop: delay must be a non-negative"),
        (lambda: JobSpecification("noop", id="../etc"), "noop: job id must match"),
        (lambda: JobSpecification("noop", domain=""), "noop: domain must be a non-empty string"),
        (lambda: JobSpecification("noop", delay=1, release_at=2), "noop: give release_at or delay"),
    ],
)
def test_a_malformed_spec_is_refused_when_made_naming_its_type(make: Any, phrase: str) -> None:
    with pytest.raises(SpecError, match=phrase.replace("(", r"\(")):
        make()


def test_a_body_over_1_mib_that_arrived_anyway_is_poison_not_a_crash(corpus_stack: LocalStack) -> None:
    # Given a batch in which one record's body is 1 MiB + 1 byte: SQS cannot have
    # delivered it, but a hand-made event can carry it
    url = corpus_stack.queue_urls["test-noop"]
    good = JobSpecification("noop")
    corpus_stack.queue_group().push(good)
    corpus_stack.sqs.send_message(QueueUrl=url, MessageBody="placeholder")
    messages = receive(corpus_stack, url, 2)
    big = json.dumps(wire(id="too-big", params={"x": ""}))
    big = big.replace('"x": ""', '"x": "' + "y" * (MAX_MESSAGE_BYTES + 1 - len(big)) + '"')
    assert len(big.encode()) == MAX_MESSAGE_BYTES + 1
    for message in messages:
        if message["Body"] == "placeholder":
            message["Body"] = big
    rejected_before = corpus_stack.size_rule.rejected  # type: ignore[attr-defined]
    corpus_stack.results.clear()
    # When the runner gets it
    results = corpus_stack.runners["noop"].process(sqs_event(messages, ARN), None)
    # Then the good job ran, and the big one is poison, in the DLQ with the reason
    assert sorted(r.outcome for r in results) == [Outcome.POISONED, Outcome.SUCCEEDED]
    corpus_stack.clock.advance(0.01)
    [dead] = corpus_stack.dead_letters("noop")
    reason = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert reason["jobkit.reason"] == "poison"
    assert (
        f"message is {MAX_MESSAGE_BYTES + 1} bytes with its attributes, over the {MAX_JOB_BYTES}"
        in reason["jobkit.error"]
    )
    assert "the DLQ copy keeps the first" in reason["jobkit.error"]
    assert big.startswith(dead["Body"]) and len(dead["Body"]) > MAX_MESSAGE_BYTES - 4096
    assert corpus_stack.size_rule.rejected == rejected_before  # type: ignore[attr-defined]  # the copy fits
    delete(corpus_stack, corpus_stack.queue_urls["test-noop-dlq"], [dead])
    delete(corpus_stack, url, [m for m in messages if m["Body"] != big])


def test_a_runners_schema_that_does_not_compile_retries_its_jobs_and_dead_letters_them_with_that_reason() -> None:
    # A runner compiles a type's params schema when its first job needs it (its declaration
    # was checked when the template was made). Found by review: a schema that does not
    # compile (a hand-edited environment) blamed each job's params and dead-lettered it at
    # once. It is the deploy's fault: the job is retried, for a deploy that fixes it, and
    # dead-lettered on its last receive with the schema named
    import json

    from jobkit.declaration.config import declaration_from_environment, declaration_to_dict
    from jobkit.sqs import TYPE_ATTRIBUTE

    raw = {
        "jobkit": {"prefix": "schema"},
        "types": {"typed": {"class": "testjobs:NoopJob", "max_attempts": 2, "params_schema": {"pattern": "("}}},
    }
    declaration = declaration_from_environment({"JOBKIT_DECLARATION": json.dumps(raw)})
    assert declaration_to_dict(declaration)["types"]["typed"]["params_schema"] == {"pattern": "("}
    with LocalStack(declaration, clock=VirtualClock(START)) as stack:
        spec = JobSpecification("typed", {"title": "Paris"}).stamped(START)
        stack.sqs.send_message(
            QueueUrl=stack.queue_url("typed"),
            MessageBody=spec.to_message(),
            MessageAttributes={TYPE_ATTRIBUTE: string_attribute("typed")},
        )
        stack.drain()
        assert [r.outcome for r in stack.results.results] == [Outcome.RETRIED, Outcome.DEAD_LETTERED]
        [dead] = stack.dead_letters("typed")
        reason = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items() if k.startswith("jobkit.")}
        assert reason["jobkit.reason"] == "internal_error"
        assert "types.typed.params_schema: is not a valid JSON Schema" in reason["jobkit.error"]
