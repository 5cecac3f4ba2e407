"""Create the declared queues, DLQs and table in an (emulated) AWS account.

These are the same resources, names and settings that template.yaml declares
for a real deployment.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.core.resources import DLQ_RETENTION_S, QUEUE_RETENTION_S, TABLE_KEYS, TTL_ATTRIBUTE
from jobkit.declaration.config import Declaration
from jobkit.sqs.limits import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient


def provision_queues(sqs: SQSClient, declaration: Declaration) -> dict[str, str]:
    """Create every queue and its DLQ. Returns SQS queue name -> URL."""
    urls: dict[str, str] = {}
    for queue, config in declaration.queues.items():
        dlq_name = declaration.dlq_name(queue)
        dlq_url = sqs.create_queue(
            QueueName=dlq_name,
            Attributes={
                "MessageRetentionPeriod": str(DLQ_RETENTION_S),
                "MaximumMessageSize": str(MAX_MESSAGE_BYTES),
                "SqsManagedSseEnabled": "true",
            },
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        name = declaration.queue_name(queue)
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": config.max_receive_count}
        urls[name] = sqs.create_queue(
            QueueName=name,
            Attributes={
                "VisibilityTimeout": str(config.visibility_timeout_s),
                "MessageRetentionPeriod": str(QUEUE_RETENTION_S),
                "MaximumMessageSize": str(MAX_MESSAGE_BYTES),
                "RedrivePolicy": json.dumps(redrive),
                "SqsManagedSseEnabled": "true",
            },
        )["QueueUrl"]
        urls[dlq_name] = dlq_url
    return urls


def provision_table(dynamodb: DynamoDBClient, declaration: Declaration) -> None:
    """Create the dedup/failure-record table: on-demand, encrypted, with TTL."""
    pk, sk = TABLE_KEYS
    dynamodb.create_table(
        TableName=declaration.table_name,
        KeySchema=[{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": pk, "AttributeType": "S"},
            {"AttributeName": sk, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        SSESpecification={"Enabled": True},
    )
    dynamodb.update_time_to_live(
        TableName=declaration.table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )


@dataclass
class Deployed:
    """What a stack deployed from a template gives the local stack."""

    outputs: dict[str, str] = field(default_factory=dict)
    queue_urls: dict[str, str] = field(default_factory=dict)
    #: Each queue's runner setting as it is when a batch comes (a later
    #: ``PutFunctionRecursionConfig`` changes it).
    recursive_loop: dict[str, Callable[[], str]] = field(default_factory=dict)


def deploy_template(
    client: Callable[[str], Any], declaration: Declaration, path: Path, *, region: str, account_id: str
) -> Deployed:
    """Deploy a SAM template into the emulated account, as ``sam deploy`` would
    (aws-sam-translator and moto's CloudFormation, :mod:`jobkit.local.cloudformation`)."""
    from jobkit.core.resources import PREFIX_PARAMETER
    from jobkit.local.cloudformation import deploy, load_template
    from jobkit.local.lambda_model import recursion_setting

    stack = deploy(
        client,
        load_template(path),
        stack_name=declaration.names.local_stack,
        parameters={PREFIX_PARAMETER: declaration.prefix},
        region=region,
        base_dir=path.parent,
    )
    deployed = Deployed(outputs=stack.outputs)
    sqs = client("sqs")
    for queue in declaration.queues:
        # by name: a queue in a nested stack has no output in the root
        for name in (declaration.queue_name(queue), declaration.dlq_name(queue)):
            deployed.queue_urls[name] = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        runner = declaration.names.runner(queue)
        deployed.recursive_loop[queue] = functools.partial(recursion_setting, runner, account_id, region)
    return deployed
