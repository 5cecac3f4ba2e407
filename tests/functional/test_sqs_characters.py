"""SQS takes only #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
#x10000-#x10FFFF in a body or a string attribute, and refuses the whole
message otherwise; moto takes anything. The local stack applies SQS's rule
(:mod:`jobkit.local.moto_patches.sqs_rules`), and jobkit sends only what SQS takes: an
error text with an ANSI colour code or a NUL is escaped in the DLQ copy's
``jobkit.error``, and params with U+FFFE or U+FFFF travel as JSON escapes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chainjobs
import pytest
from botocore.exceptions import ClientError

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack

from conftest import START

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HOSTILE = "\x1b[31mparse error\x1b[0m at byte \x00: \x07\x0b\x1f \ufffe\uffff"


@pytest.fixture(scope="module")
def declaration() -> Declaration:
    types = {"failing": {"class": "chainjobs:ErrorJob"}, "echo": {"class": "chainjobs:EchoJob"}}
    return parse_declaration({"jobkit": {"prefix": "chars", "code_dir": str(FIXTURES)}, "types": types}, source="test")


@pytest.fixture
def stack(declaration: Declaration) -> Iterator[LocalStack]:
    chainjobs.RUNS.clear()
    chainjobs.TEXTS.clear()
    with LocalStack(declaration, clock=VirtualClock(START)) as local:
        yield local


def test_the_local_stack_refuses_what_sqs_refuses(stack: LocalStack) -> None:
    url = stack.queue_url("echo")
    for body, attributes in (
        ("a\x1bb", {}),
        ("ok", {"note": {"DataType": "String", "StringValue": "\x00"}}),
        ("\uffff", {}),
    ):
        with pytest.raises(ClientError) as refused:
            stack.sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attributes)
        assert refused.value.response["Error"]["Code"] == "InvalidMessageContents"
    with pytest.raises(ClientError):  # one bad entry refuses the batch, and nothing of it is sent
        stack.sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "fine"}, {"Id": "2", "MessageBody": "\x00"}]
        )
    assert stack.queue_depth("echo") == 0
    stack.sqs.send_message(QueueUrl=url, MessageBody="tab\t newline\n é \U0001f600 \ud7ff\ue000")


def test_an_error_text_with_control_characters_is_dead_lettered_at_once_with_its_reason(stack: LocalStack) -> None:
    # Given a job that fails for good with an error a C library or a subprocess wrote
    stack.queue_group("enwiki").push(JobSpecification("failing", {"error": HOSTILE}))
    stack.drain()
    # Then it ran once, and its DLQ copy carries the reason, the characters SQS refuses escaped
    assert chainjobs.RUNS == [("error", 0)]
    [dead] = stack.dead_letters("failing")
    attributes = dead["MessageAttributes"]
    assert attributes["jobkit.reason"]["StringValue"] == "non_retryable"
    error = attributes["jobkit.error"]["StringValue"]
    assert error.startswith("\\x1b[31mparse error\\x1b[0m at byte \\x00: \\x07\\x0b\\x1f \\ufffe\\uffff"), error
    assert [r.outcome for r in stack.results.results] == [Outcome.DEAD_LETTERED]


def test_params_with_noncharacters_are_pushed_and_reach_the_job_unchanged(stack: LocalStack) -> None:
    text = "keep \ufffe and \uffff and \x00 and \x1b"
    stack.queue_group("enwiki").push(JobSpecification("echo", {"text": text}))
    stack.drain()
    assert [text] == chainjobs.TEXTS
