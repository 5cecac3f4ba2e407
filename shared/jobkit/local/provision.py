"""Create the declared queues, DLQs and table in an (emulated) AWS account.

These are the same resources, names and settings that template.yaml declares
for a real deployment.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from jobkit.config import Declaration
from jobkit.resources import DLQ_RETENTION_S, QUEUE_RETENTION_S, TABLE_KEYS, TTL_ATTRIBUTE
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
