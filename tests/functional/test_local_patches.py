"""The local stack changes moto for its own life only: a user's own moto test
in the same process, before or after a stack, sees moto as moto ships it."""

from __future__ import annotations

import importlib
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import Declaration
from jobkit.local import LocalStack

from conftest import START

#: (module, attribute path) of what the local stack changes, one or more per moto service.
PATCHED = [
    ("moto.core.utils", "utcnow"),
    ("moto.core.responses", "method_names_from_class"),
    ("moto.sqs.models", "unix_time"),
    ("moto.sqs.models", "generate_receipt_handle"),
    ("moto.sqs.models", "SQSBackend.receive_message"),
    ("moto.sqs.models", "SQSBackend.send_message"),
    ("moto.sqs.models", "SQSBackend.change_message_visibility"),
    ("moto.sqs.models", "Queue.delete_message"),
    ("moto.sqs.models", "Message.mark_received"),
    ("moto.dynamodb.models", "DynamoDBBackend.update_item"),
    ("moto.dynamodb.models", "DynamoDBBackend.query"),
    ("moto.cloudwatch.models", "Statistics.get_statistics_for_type"),
    ("moto.awslambda.models", "LambdaFunction.create_from_cloudformation_json"),
    ("moto.awslambda.responses", "LambdaResponse.get_function_recursion_config"),
]


def current() -> dict[str, Any]:
    found = {}
    for module, path in PATCHED:
        owner: Any = importlib.import_module(module)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        found[f"{module}.{path}"] = (
            owner.__dict__.get(name, "absent") if isinstance(owner, type) else getattr(owner, name)
        )
    return found


def test_moto_is_as_shipped_before_and_after_a_stack(test_declaration: Declaration) -> None:
    before = current()
    with LocalStack(test_declaration, clock=VirtualClock(START), publish_metrics=True) as stack:
        during = current()
        stack.queue_group().push(JobSpecification("noop", {}))
        stack.drain()
    assert current() == before
    changed = [name for name in before if during[name] is not before[name]]
    assert len(changed) == len(PATCHED), f"not changed during the stack (update PATCHED): {set(before) - set(changed)}"


@pytest.mark.parametrize("order", ["after a stack", "before a stack"])
def test_a_users_own_moto_test_sees_plain_moto(test_declaration: Declaration, order: str) -> None:
    def users_test() -> None:
        with mock_aws():
            sqs = boto3.client("sqs", region_name="us-east-1")
            url = sqs.create_queue(QueueName="mine")["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody="hello")
            [message] = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
            assert message["Body"] == "hello"
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "1"
            # moto's own queue, a plain list: no index of the local stack's
            queue: Any = (
                importlib.import_module("moto.sqs.models").sqs_backends["123456789012"]["us-east-1"].queues["mine"]
            )
            assert type(queue.__dict__["_messages"]) is list

    if order == "before a stack":
        users_test()
    with LocalStack(test_declaration, clock=VirtualClock(START)):
        pass
    users_test()


def test_a_moto_the_stack_was_not_written_for_is_refused_loudly_before_anything_changes(
    test_declaration: Declaration, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobkit.local.moto_patches import MotoUnsupported
    from jobkit.local.moto_patches import check as moto_check

    before = current()
    monkeypatch.setattr(moto_check, "NEEDED", (*moto_check.NEEDED, ("moto.sqs.models", "SQSBackend.no_such_method")))
    with pytest.raises(MotoUnsupported, match=r"lacks .*moto\.sqs\.models\.SQSBackend\.no_such_method"):
        LocalStack(test_declaration, clock=VirtualClock(START)).start()
    assert current() == before  # nothing was changed
    monkeypatch.undo()
    monkeypatch.setattr(moto_check.importlib.metadata, "version", lambda name: "6.0.0")
    with pytest.raises(MotoUnsupported, match=r"written for moto 5\.x; moto 6\.0\.0 is installed"):
        LocalStack(test_declaration, clock=VirtualClock(START)).start()
    assert current() == before
