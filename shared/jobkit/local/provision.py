"""Create the declared queues, DLQs and table in an (emulated) AWS account,
from the template builder's own resources (:func:`jobkit.template.resources.sqs_queues`,
:func:`~jobkit.template.resources.jobs_table`): a setting changed in the
template is changed here too. Or deploy a SAM template itself
(:func:`deploy_template`), as ``jobkit local up --template`` does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.declaration.config import Declaration
from jobkit.template.naming import QueueIds
from jobkit.template.payload_bucket import local_bucket_name, payload_bucket
from jobkit.template.resources import jobs_table, sqs_queues

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType


def provision_queues(sqs: SQSClient, declaration: Declaration) -> dict[str, str]:
    """Create every queue and its DLQ (and every priority lane's), as the template
    declares them. Returns SQS queue name -> URL."""
    urls: dict[str, str] = {}
    for queue, lane in ((declaration.queues[lane.queue], lane.key) for lane in declaration.lanes.values()):
        ids, resources = QueueIds(lane), sqs_queues(queue)
        dlq_name = declaration.dlq_name(lane)
        dlq_url = sqs.create_queue(QueueName=dlq_name, Attributes=_queue_attributes(resources[ids.dlq], {}))["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        name = declaration.queue_name(lane)
        attributes = _queue_attributes(resources[ids.queue], {ids.dlq: dlq_arn})
        urls[name] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        urls[dlq_name] = dlq_url
    return urls


def _queue_attributes(resource: Mapping[str, Any], arns: Mapping[str, str]) -> dict[QueueAttributeNameType, str]:
    """An ``AWS::SQS::Queue``'s properties as CreateQueue's attributes (every
    property but the name is an attribute of the same name, as a string)."""
    attributes: dict[QueueAttributeNameType, str] = {}
    for name, value in resource["Properties"].items():
        if name == "QueueName":
            continue
        if name == "RedrivePolicy":
            [target, _] = value["deadLetterTargetArn"]["Fn::GetAtt"]
            value = json.dumps({**value, "deadLetterTargetArn": arns[target]})
        attributes[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return attributes


def provision_table(dynamodb: DynamoDBClient, declaration: Declaration) -> None:
    """Create the jobs table as the template declares it: its keys, billing,
    encryption, point-in-time recovery and TTL."""
    properties = jobs_table()["Properties"]
    table = declaration.table_name
    dynamodb.create_table(
        TableName=table,
        KeySchema=properties["KeySchema"],
        AttributeDefinitions=properties["AttributeDefinitions"],
        BillingMode=properties["BillingMode"],
        SSESpecification={"Enabled": properties["SSESpecification"]["SSEEnabled"]},
    )
    dynamodb.update_continuous_backups(
        TableName=table, PointInTimeRecoverySpecification=properties["PointInTimeRecoverySpecification"]
    )
    dynamodb.update_time_to_live(TableName=table, TimeToLiveSpecification=properties["TimeToLiveSpecification"])


def provision_bucket(s3: Any, declaration: Declaration, region: str) -> str:
    """Create the payload bucket as the template declares it: encryption, no
    public access, the lifecycle rule (not its TLS-only policy: the local stack
    speaks HTTP). Returns its name."""
    properties = payload_bucket()["Properties"]
    name = local_bucket_name(declaration.prefix)
    where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=name, **where)
    encryption = [  # (the API's name for CloudFormation's ServerSideEncryptionByDefault)
        {"ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"], "BucketKeyEnabled": True}
        for rule in properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    ]
    s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": encryption})
    s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=properties["PublicAccessBlockConfiguration"])
    rules = [
        {
            "ID": rule["Id"],
            "Status": rule["Status"],
            "Filter": {"Prefix": rule["Prefix"]},
            "Expiration": {"Days": rule["ExpirationInDays"]},
            "AbortIncompleteMultipartUpload": rule["AbortIncompleteMultipartUpload"],
        }
        for rule in properties["LifecycleConfiguration"]["Rules"]
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": rules})
    return name


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
    from jobkit.local.moto_patches.lambda_model import recursion_setting

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
    for lane in declaration.lanes:
        # by name: a queue in a nested stack has no output in the root
        for name in (declaration.queue_name(lane), declaration.dlq_name(lane)):
            deployed.queue_urls[name] = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    for queue in declaration.queues:
        runner = declaration.names.runner(queue)
        deployed.recursive_loop[queue] = functools.partial(recursion_setting, runner, account_id, region)
    return deployed
