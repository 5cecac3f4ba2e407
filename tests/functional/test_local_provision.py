"""The local stack provisions from the template builder's own resources: its
queues, DLQs and table carry what template.yaml declares, read back through
the AWS API (moto), and a setting changed in the builder changes them too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

import jobkit.local.provision as provision
from jobkit.declaration.config import Declaration
from jobkit.local.provision import provision_queues, provision_table
from jobkit.template.naming import QueueIds
from jobkit.template.resources import jobs_table, sqs_queues


@pytest.fixture
def aws() -> Iterator[tuple[Any, Any]]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1"), boto3.client("dynamodb", region_name="us-east-1")


def test_queues_and_dlqs_have_the_templates_settings(aws: tuple[Any, Any], test_declaration: Declaration) -> None:
    sqs, _ = aws
    urls = provision_queues(sqs, test_declaration)
    for queue, config in test_declaration.queues.items():
        ids, declared = QueueIds(queue), sqs_queues(config)
        for logical, name in (
            (ids.queue, test_declaration.queue_name(queue)),
            (ids.dlq, test_declaration.dlq_name(queue)),
        ):
            got = sqs.get_queue_attributes(QueueUrl=urls[name], AttributeNames=["All"])["Attributes"]
            for key, value in declared[logical]["Properties"].items():
                if key == "QueueName":
                    continue
                if key == "RedrivePolicy":
                    redrive = json.loads(got[key])
                    assert redrive["maxReceiveCount"] == config.max_receive_count
                    assert redrive["deadLetterTargetArn"].endswith(":" + test_declaration.dlq_name(queue))
                else:
                    assert got[key] == (str(value).lower() if isinstance(value, bool) else str(value)), (name, key)


def test_the_table_has_the_templates_keys_encryption_recovery_and_ttl(
    aws: tuple[Any, Any], test_declaration: Declaration
) -> None:
    _, dynamodb = aws
    provision_table(dynamodb, test_declaration)
    declared = jobs_table()["Properties"]
    table = dynamodb.describe_table(TableName=test_declaration.table_name)["Table"]
    assert table["KeySchema"] == declared["KeySchema"]
    assert table["BillingModeSummary"]["BillingMode"] == declared["BillingMode"]
    assert table["SSEDescription"]["Status"] == "ENABLED"
    backups = dynamodb.describe_continuous_backups(TableName=test_declaration.table_name)[
        "ContinuousBackupsDescription"
    ]
    assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    ttl = dynamodb.describe_time_to_live(TableName=test_declaration.table_name)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": declared["TimeToLiveSpecification"]["AttributeName"]}


def test_a_setting_changed_in_the_template_builder_changes_the_local_queues(
    aws: tuple[Any, Any], test_declaration: Declaration, monkeypatch: pytest.MonkeyPatch
) -> None:
    def longer_retention(config: Any) -> dict[str, Any]:
        resources = sqs_queues(config)
        resources[QueueIds(config.name).queue]["Properties"]["MessageRetentionPeriod"] = 86_400
        return resources

    monkeypatch.setattr(provision, "sqs_queues", longer_retention)
    sqs, _ = aws
    urls = provision_queues(sqs, test_declaration)
    name = test_declaration.queue_name(next(iter(test_declaration.queues)))
    got = sqs.get_queue_attributes(QueueUrl=urls[name], AttributeNames=["MessageRetentionPeriod"])["Attributes"]
    assert got["MessageRetentionPeriod"] == "86400"


def test_an_exported_endpoint_does_not_lead_the_in_process_stack_astray(
    test_declaration: Declaration, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `jobkit local up` tells a developer to export AWS_ENDPOINT_URL; a test's own stack must not follow it
    from jobkit import JobSpecification
    from jobkit.core.outcome import Outcome
    from jobkit.local import LocalStack

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    with LocalStack(test_declaration) as stack:
        stack.queue_group().push(JobSpecification("noop"))
        stack.drain()
        assert [r.outcome for r in stack.results.results] == [Outcome.SUCCEEDED]
