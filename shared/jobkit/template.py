"""template.yaml, generated from the declaration (``jobkit template``).

Per declared queue: an SQS queue and its DLQ, a runner function with an SQS
event source, and alarms; per job type: a pickup-delay alarm and dashboard
widgets; once: the jobkit layer, the jobs table, an optional alarm topic and
the dashboard. Every runner gets least-privilege IAM: it may consume only its
own queue, send only to its own queue (delay hops and deferrals), the queues of
the types its jobs push, and its own DLQ, and use only its own types' records in
the jobs table, plus the root records of the types its jobs push
(``dynamodb:LeadingKeys``, see :mod:`jobkit.record_keys`). Apps that push attach
the ``ProducerPolicy`` managed policy. What is stored where, and who may read
it: docs/security.md.

Resources of the user's own (an S3 bucket the jobs write to, say) go in
``infra/template-extra.yaml``; they are merged in and never overwritten.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jobkit.config import Declaration, QueueConfig, declaration_to_dict
from jobkit.errors import ConfigError
from jobkit.outcome import Outcome
from jobkit.record_keys import own_records_pattern, root_records_pattern
from jobkit.resources import DLQ_RETENTION_S, QUEUE_RETENTION_S, TABLE_KEYS, TTL_ATTRIBUTE

RUNTIME = "python3.12"  # python3.11 runs on Amazon Linux 2, which Lambda deprecated on 2026-06-30
ARCHITECTURE = "arm64"
MAX_ENVIRONMENT_BYTES = 4096  # Lambda's limit on all environment variables together
HEADER = (
    "# Generated from infra/jobs.toml by `jobkit template`. Do not edit: edit the declaration,\n"
    "# or add resources of your own to infra/template-extra.yaml, and run `jobkit template` again.\n"
)
SECTIONS_USERS_MAY_EXTEND = ("Parameters", "Conditions", "Resources", "Outputs")
# fmt: off
#: The retention periods CloudWatch Logs accepts (PutRetentionPolicy), in days.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731,
                      1096, 1827, 2192, 2557, 2922, 3288, 3653)
# fmt: on
#: What the runner does with the table: claims, failure and status records, reads of them.
RUNNER_TABLE_ACTIONS = [f"dynamodb:{action}" for action in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query")]

#: checkov findings that do not apply, with why; checkov reads these from each
#: resource's ``Metadata`` (``checkov -f template.yaml --framework cloudformation``).
CHECKOV_SKIPS = {
    "CKV_AWS_27": (
        "Encrypted at rest with SSE-SQS (SqsManagedSseEnabled: true, keys owned by SQS, no KMS charges);"
        " this check only recognises SSE-KMS (KmsMasterKeyId)"
    ),
    "CKV_AWS_119": (
        "Encrypted at rest with the AWS managed key (SSESpecification.SSEEnabled). The table holds job IDs,"
        " dedup hashes, root timestamps, claims, and for 14 days failure and status records: the error"
        " messages jobs raise (which may quote params unless the job overrides Job.error_message) and the"
        " results of track_status types; never the params themselves (see docs/security.md). A customer"
        " managed key would add a key policy to run and a KMS charge to every dedup request"
    ),
    "CKV_AWS_116": (
        "A function DLQ only catches failed asynchronous invocations; the event source mapping invokes the"
        " runner synchronously, and failed jobs go to the queue's own DLQ (redrive policy and the runner)"
    ),
    "CKV_AWS_117": (
        "The runner calls only AWS APIs (SQS, DynamoDB, CloudWatch Logs) over TLS with IAM auth and reaches"
        " no private resource; a VPC would add NAT or endpoint cost and isolate nothing"
    ),
    "CKV_AWS_115": (
        "Concurrency is capped per queue by the event source mapping's ScalingConfig.MaximumConcurrency;"
        " reserved concurrency would also take capacity from the account's pool, and set below that cap"
        " it throttles invocations that then return messages to the queue"
    ),
    "CKV_AWS_173": (
        "The environment holds no secrets and no job data (the declared types and their settings, the stack"
        " prefix, the queue name and URLs, the log level), and Lambda encrypts it at rest with its AWS managed"
        " key; see docs/security.md"
    ),
    "CKV_AWS_26": (
        "The topic carries only alarm state changes (alarm name, metric, threshold, time), no job data;"
        " CloudWatch alarms cannot publish to a topic encrypted with the AWS managed SNS key (alias/aws/sns),"
        " and a customer managed key would add a key policy to run and a KMS charge"
    ),
    "CKV_AWS_158": (
        "CloudWatch Logs encrypts every log group at rest by default; the only job-derived text in the"
        " runner's logs is the error messages jobs raise (params are logged at DEBUG only), kept for"
        " LogRetentionDays; a customer managed key would add a key policy to run. See docs/security.md"
    ),
}


def render(declaration: Declaration, extra: Mapping[str, Any] | None = None) -> str:
    """The SAM template for a declaration, as YAML text."""
    import yaml

    return HEADER + yaml.safe_dump(build(declaration, extra), sort_keys=False, width=120, allow_unicode=True)


def build(declaration: Declaration, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The SAM template for a declaration, as a dict."""
    template: dict[str, Any] = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Description": "jobkit: a job queue on SQS, Lambda and DynamoDB (generated from infra/jobs.toml)",
        "Parameters": _parameters(declaration),
        "Conditions": {"HasAlarmEmail": {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}},
        "Resources": {**_shared_resources(declaration)},
        "Outputs": {
            "JobsTableName": {"Description": "The jobs table", "Value": {"Ref": "JobsTable"}},
            "ProducerPolicyArn": {
                "Description": "The managed policy an app's role attaches to push jobs",
                "Value": {"Ref": "ProducerPolicy"},
            },
        },
    }
    for queue in declaration.queues.values():
        template["Resources"].update(_queue_resources(declaration, queue))
        template["Outputs"].update(_queue_outputs(queue))
    for job_type in declaration.types.values():
        template["Resources"].update(_type_alarms(declaration, job_type.name))
    template["Resources"]["Dashboard"] = _dashboard(declaration)
    if extra:
        _merge_extra(template, extra)
    return template


def load_extra(path: Path) -> dict[str, Any] | None:
    """The user's own template sections, if the file exists."""
    import yaml

    if not path.exists():
        return None
    try:
        loaded = yaml.load(path.read_text(), Loader=_CloudFormationLoader)  # a SafeLoader that knows !Ref and friends
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), "", f"not valid YAML: {exc}") from exc
    if loaded is None:
        return None
    if not isinstance(loaded, dict):
        raise ConfigError(str(path), "", "must be a mapping of template sections")
    unknown = set(loaded) - set(SECTIONS_USERS_MAY_EXTEND)
    if unknown:
        raise ConfigError(str(path), sorted(unknown)[0], f"only {', '.join(SECTIONS_USERS_MAY_EXTEND)} may be extended")
    return loaded


def logical_id(name: str) -> str:
    """A CloudFormation logical ID from a queue or type name: alphanumeric, capitalised."""
    parts = re.split(r"[^A-Za-z0-9]+", name)
    return "".join(part[:1].upper() + part[1:] for part in parts if part)


# -- parameters and shared resources --------------------------------------------------------


def _parameters(declaration: Declaration) -> dict[str, Any]:
    return {
        "Prefix": {
            "Type": "String",
            "Default": declaration.prefix,
            "AllowedPattern": "^[A-Za-z][A-Za-z0-9-]{0,15}$",
            "Description": "Resource name prefix, e.g. a stage: queues are {Prefix}-{queue}, the table {Prefix}-jobs",
        },
        "AlarmEmail": {
            "Type": "String",
            "Default": "",
            "Description": "Where alarm notifications go (an SNS email subscription); empty for none",
        },
        "PickupDelayAlarmMs": {
            "Type": "Number",
            "Default": 300000,
            "MinValue": 1,
            "Description": "Alarm when a job type's p95 pickup delay stays above this many milliseconds",
        },
        "OldestMessageAlarmSeconds": {
            "Type": "Number",
            "Default": 900,
            "MinValue": 60,
            "Description": "Alarm when a queue's oldest message is older than this",
        },
        "LogRetentionDays": {
            "Type": "Number",
            "Default": 30,
            "AllowedValues": list(LOG_RETENTION_DAYS),
            "Description": "How many days the runners' log groups keep their logs (which carry jobs' error messages)",
        },
    }


def _shared_resources(declaration: Declaration) -> dict[str, Any]:
    pk, sk = TABLE_KEYS
    return {
        "JobkitLayer": {
            "Type": "AWS::Serverless::LayerVersion",
            "Properties": {
                "Description": "The jobkit package and its dependencies",
                "ContentUri": "shared/",
                "CompatibleRuntimes": [RUNTIME],
                "CompatibleArchitectures": [ARCHITECTURE],
                "RetentionPolicy": "Delete",
            },
            # A makefile build cross-installs wheels for the Lambda runtime with pip
            # (--python-version, --platform), so `sam build` needs no matching local
            # Python and no container (see shared/Makefile).
            "Metadata": {"BuildMethod": "makefile", "BuildArchitecture": ARCHITECTURE},
        },
        "JobsTable": {
            "Type": "AWS::DynamoDB::Table",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {
                "TableName": {"Fn::Sub": "${Prefix}-jobs"},
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [
                    {"AttributeName": pk, "AttributeType": "S"},
                    {"AttributeName": sk, "AttributeType": "S"},
                ],
                "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
                "SSESpecification": {"SSEEnabled": True},
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "TimeToLiveSpecification": {"AttributeName": TTL_ATTRIBUTE, "Enabled": True},
            },
            "Metadata": _checkov_skips("CKV_AWS_119"),
        },
        # Unencrypted: CloudWatch alarms cannot publish to a topic encrypted with
        # alias/aws/sns, and the topic carries alarm state changes, no job data.
        "AlarmTopic": {
            "Type": "AWS::SNS::Topic",
            "Condition": "HasAlarmEmail",
            "Properties": {
                "TopicName": {"Fn::Sub": "${Prefix}-alarms"},
                "Subscription": [{"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}}],
            },
            "Metadata": _checkov_skips("CKV_AWS_26"),
        },
        "ProducerPolicy": _producer_policy(declaration),
    }


def _producer_policy(declaration: Declaration) -> dict[str, Any]:
    """What an app that pushes needs: send to every job queue (not the DLQs), look
    their URLs up, and record the root jobs it pushes. An app's role attaches it."""
    return {
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {
            "ManagedPolicyName": {"Fn::Sub": "${Prefix}-producer"},
            "Description": "jobkit: push jobs of every declared type (attach to an app's role)",
            "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "SendToJobQueues",
                        "Effect": "Allow",
                        "Action": ["sqs:SendMessage", "sqs:GetQueueUrl"],
                        "Resource": [
                            {"Fn::GetAtt": [f"{logical_id(name)}Queue", "Arn"]} for name in declaration.queues
                        ],
                    },
                    _table_statement(
                        "RecordRootJobs", ["dynamodb:UpdateItem"], map(root_records_pattern, declaration.types)
                    ),
                ],
            },
        },
    }


def _table_statement(sid: str, actions: list[str], leading_keys: Iterable[str]) -> dict[str, Any]:
    """Actions on the jobs table, only on records whose partition key matches one of
    ``leading_keys``. ``ForAllValues`` holds for a request without a partition key
    (a Scan, say), so the ``Null`` condition requires one."""
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": list(actions),
        "Resource": {"Fn::GetAtt": ["JobsTable", "Arn"]},
        "Condition": {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": sorted(leading_keys)},
            "Null": {"dynamodb:LeadingKeys": "false"},
        },
    }


# -- per queue ----------------------------------------------------------------------------------


def _queue_resources(declaration: Declaration, queue: QueueConfig) -> dict[str, Any]:
    q = logical_id(queue.name)
    return {
        f"{q}DeadLetterQueue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": {"Fn::Sub": f"${{Prefix}}-{queue.name}-dlq"},
                "MessageRetentionPeriod": DLQ_RETENTION_S,
                "SqsManagedSseEnabled": True,
            },
            "Metadata": _checkov_skips("CKV_AWS_27"),
        },
        f"{q}Queue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": {"Fn::Sub": f"${{Prefix}}-{queue.name}"},
                "VisibilityTimeout": queue.visibility_timeout_s,
                "MessageRetentionPeriod": QUEUE_RETENTION_S,
                "SqsManagedSseEnabled": True,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": [f"{q}DeadLetterQueue", "Arn"]},
                    "maxReceiveCount": queue.max_receive_count,
                },
            },
            "Metadata": _checkov_skips("CKV_AWS_27"),
        },
        f"{q}Runner": _runner_function(declaration, queue),
        # Declared, rather than left to Lambda to create on first write, so that its
        # logs expire. The runner logs to it by name and by LoggingConfig.
        f"{q}RunnerLogGroup": {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {
                "LogGroupName": {"Fn::Sub": f"/aws/lambda/${{Prefix}}-runner-{queue.name}"},
                "RetentionInDays": {"Ref": "LogRetentionDays"},
            },
            "Metadata": _checkov_skips("CKV_AWS_158"),
        },
        # The event source mapping is declared here rather than as the function's
        # SAM `Events`: for an SQS event SAM attaches the managed policy
        # AWSLambdaSQSQueueExecutionRole, which allows receiving and deleting on
        # every queue in the account ("Resource": "*"). The runner's own policy
        # already lets it consume its queue, and nothing else. (The logical ID is
        # the one SAM gave it.)
        f"{q}RunnerQueue": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "EventSourceArn": {"Fn::GetAtt": [f"{q}Queue", "Arn"]},
                "FunctionName": {"Ref": f"{q}Runner"},
                "BatchSize": queue.batch_size,
                "MaximumBatchingWindowInSeconds": queue.batch_window_s,
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "ScalingConfig": {"MaximumConcurrency": queue.max_concurrency},
            },
        },
        f"{q}DeadLettersAlarm": _alarm(
            f"jobs of queue {queue.name} are in its DLQ",
            namespace="AWS/SQS",
            metric="ApproximateNumberOfMessagesVisible",
            dimensions=[{"Name": "QueueName", "Value": {"Fn::GetAtt": [f"{q}DeadLetterQueue", "QueueName"]}}],
            statistic="Maximum",
            threshold=0,
        ),
        f"{q}OldestMessageAlarm": _alarm(
            f"queue {queue.name} is not keeping up: its oldest message is too old",
            namespace="AWS/SQS",
            metric="ApproximateAgeOfOldestMessage",
            dimensions=[{"Name": "QueueName", "Value": {"Fn::GetAtt": [f"{q}Queue", "QueueName"]}}],
            statistic="Maximum",
            threshold={"Ref": "OldestMessageAlarmSeconds"},
        ),
    }


def _runner_function(declaration: Declaration, queue: QueueConfig) -> dict[str, Any]:
    q = logical_id(queue.name)
    own = set(queue.types)
    targets = {target for name in queue.types for target in declaration.types[name].pushes}
    target_queues = sorted({declaration.types[t].queue for t in targets} | {queue.name})
    subset = declaration_to_dict(declaration, only_types=own | targets)
    subset["jobkit"].pop("prefix")  # the stack's Prefix parameter names the resources
    declaration_json = json.dumps(subset, separators=(",", ":"), sort_keys=True)
    urls = {f"${{Prefix}}-{name}": f"${{{logical_id(name)}Queue}}" for name in target_queues}
    urls[f"${{Prefix}}-{queue.name}-dlq"] = f"${{{q}DeadLetterQueue}}"
    urls_json = json.dumps(urls, separators=(",", ":"), sort_keys=True)
    _check_environment_size(declaration, queue, declaration_json, urls_json, queue.name)
    queue_arns = [{"Fn::GetAtt": [f"{logical_id(name)}Queue", "Arn"]} for name in target_queues]
    # All records of its own types; of the other types its jobs push, only the root
    # records (pushing a root job records its root timestamp).
    table_statements = [_table_statement("UseOwnTypesRecords", RUNNER_TABLE_ACTIONS, map(own_records_pattern, own))]
    if targets - own:
        pushed = map(root_records_pattern, targets - own)
        table_statements.append(_table_statement("RecordPushedRootJobs", ["dynamodb:UpdateItem"], pushed))
    properties: dict[str, Any] = {
        "FunctionName": {"Fn::Sub": f"${{Prefix}}-runner-{queue.name}"},
        "Description": f"jobkit runner for queue {queue.name}: {', '.join(queue.types)}",
        "CodeUri": _code_uri(declaration),
        "Handler": "app.handler",
        "Runtime": RUNTIME,
        "Architectures": [ARCHITECTURE],
        "Timeout": queue.timeout_s,
        "MemorySize": queue.memory_mb,
        "Layers": [{"Ref": "JobkitLayer"}],
        "LoggingConfig": {"LogGroup": {"Ref": f"{q}RunnerLogGroup"}},
        "Environment": {
            "Variables": {
                "JOBKIT_DECLARATION": declaration_json,
                "JOBKIT_PREFIX": {"Ref": "Prefix"},
                "JOBKIT_QUEUE": queue.name,
                "JOBKIT_QUEUE_URLS": {"Fn::Sub": urls_json},
                "POWERTOOLS_LOG_LEVEL": "INFO",
            }
        },
        "Policies": [
            {
                "Statement": [
                    {
                        "Sid": "ConsumeOwnQueue",
                        "Effect": "Allow",
                        "Action": [
                            "sqs:ReceiveMessage",
                            "sqs:DeleteMessage",
                            "sqs:ChangeMessageVisibility",
                            "sqs:GetQueueAttributes",
                        ],
                        "Resource": {"Fn::GetAtt": [f"{q}Queue", "Arn"]},
                    },
                    {
                        # Its own queue (delay hops, deferrals), the queues of the
                        # types its jobs push, and its own DLQ.
                        "Sid": "SendToDeclaredQueues",
                        "Effect": "Allow",
                        "Action": ["sqs:SendMessage"],
                        "Resource": [*queue_arns, {"Fn::GetAtt": [f"{q}DeadLetterQueue", "Arn"]}],
                    },
                    *table_statements,
                ]
            }
        ],
    }
    return {
        "Type": "AWS::Serverless::Function",
        "Properties": properties,
        "Metadata": {
            "BuildMethod": "makefile",
            "BuildArchitecture": ARCHITECTURE,
            **_checkov_skips("CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173"),
        },
    }


def _checkov_skips(*check_ids: str) -> dict[str, Any]:
    return {"checkov": {"skip": [{"id": check_id, "comment": CHECKOV_SKIPS[check_id]} for check_id in check_ids]}}


def _code_uri(declaration: Declaration) -> str:
    if declaration.code_dir is None:
        return "functions/runner/"
    source = Path(declaration.source).resolve().parent.parent  # infra/jobs.toml -> the project root
    try:
        return declaration.code_dir.resolve().relative_to(source).as_posix() + "/"
    except ValueError:
        return declaration.code_dir.as_posix() + "/"


def _check_environment_size(declaration: Declaration, queue: QueueConfig, *values: str) -> None:
    size = sum(len(v.encode("utf-8")) for v in values) + 200  # names, prefix and log level
    if size > MAX_ENVIRONMENT_BYTES:
        raise ConfigError(
            declaration.source,
            f"types.{queue.types[0]}.queue",
            f"the runner of queue {queue.name!r} would need {size} bytes of environment, over Lambda's "
            f"{MAX_ENVIRONMENT_BYTES}: give some of its types (or the types they push) their own queue",
        )


def _queue_outputs(queue: QueueConfig) -> dict[str, Any]:
    q = logical_id(queue.name)
    return {
        f"{q}QueueUrl": {"Description": f"URL of queue {queue.name}", "Value": {"Ref": f"{q}Queue"}},
        f"{q}QueueArn": {"Description": f"ARN of queue {queue.name}", "Value": {"Fn::GetAtt": [f"{q}Queue", "Arn"]}},
        f"{q}DeadLetterQueueUrl": {
            "Description": f"URL of the DLQ of queue {queue.name}",
            "Value": {"Ref": f"{q}DeadLetterQueue"},
        },
        f"{q}DeadLetterQueueArn": {
            "Description": f"ARN of the DLQ of queue {queue.name}",
            "Value": {"Fn::GetAtt": [f"{q}DeadLetterQueue", "Arn"]},
        },
    }


# -- alarms and dashboard -----------------------------------------------------------------------


def _type_alarms(declaration: Declaration, job_type: str) -> dict[str, Any]:
    return {
        f"{logical_id(job_type)}PickupDelayAlarm": _alarm(
            f"{job_type} jobs wait too long to be picked up (p95 pickup delay)",
            namespace=declaration.namespace,
            metric="PickupDelay",
            dimensions=[{"Name": "JobType", "Value": job_type}],
            statistic=None,
            extended_statistic="p95",
            threshold={"Ref": "PickupDelayAlarmMs"},
            periods=3,
        )
    }


def _alarm(
    description: str,
    *,
    namespace: str,
    metric: str,
    dimensions: list[dict[str, Any]],
    statistic: str | None,
    threshold: Any,
    extended_statistic: str | None = None,
    periods: int = 1,
) -> dict[str, Any]:
    actions = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    properties: dict[str, Any] = {
        "AlarmDescription": description,
        "Namespace": namespace,
        "MetricName": metric,
        "Dimensions": dimensions,
        "Period": 60,
        "EvaluationPeriods": periods,
        "Threshold": threshold,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching",
        "AlarmActions": actions,
        "OKActions": actions,
    }
    if extended_statistic:
        properties["ExtendedStatistic"] = extended_statistic
    else:
        properties["Statistic"] = statistic
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": properties}


def _dashboard(declaration: Declaration) -> dict[str, Any]:
    """Per job type, a row: jobs by outcome, throughput, pickup delay, DLQ depth (the
    "top-style view" the 2012 job-queue redesign RFC asked for)."""
    widgets: list[dict[str, Any]] = []
    namespace = declaration.namespace
    for row, job_type in enumerate(declaration.types.values()):
        queue = f"${{Prefix}}-{job_type.queue}"
        y = row * 6
        dimension = ["JobType", job_type.name]
        widgets += [
            _widget(
                0,
                y,
                f"{job_type.name}: jobs",
                "Sum",
                [[namespace, metric, *dimension] for metric in (*Outcome.final_metrics(), "Failed")],
            ),
            _widget(
                6,
                y,
                f"{job_type.name}: queue {job_type.queue} in and out",
                "Sum",
                [
                    ["AWS/SQS", "NumberOfMessagesSent", "QueueName", queue],
                    ["AWS/SQS", "NumberOfMessagesDeleted", "QueueName", queue],
                ],
            ),
            _widget(
                12,
                y,
                f"{job_type.name}: pickup delay (ms)",
                None,
                [
                    [namespace, "PickupDelay", *dimension, {"stat": "p50"}],
                    [namespace, "PickupDelay", *dimension, {"stat": "p95"}],
                ],
            ),
            _widget(
                18,
                y,
                f"{job_type.name}: backlog and dead letters",
                "Maximum",
                [
                    ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", queue],
                    ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", queue, {"yAxis": "right"}],
                    ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", f"{queue}-dlq"],
                ],
            ),
        ]
    body = json.dumps({"widgets": widgets}, separators=(",", ":"))
    return {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardName": {"Fn::Sub": "${Prefix}-jobs"}, "DashboardBody": {"Fn::Sub": body}},
    }


def _widget(x: int, y: int, title: str, stat: str | None, metrics: list[list[Any]]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "title": title,
        "region": "${AWS::Region}",
        "period": 60,
        "metrics": metrics,
        "view": "timeSeries",
    }
    if stat:
        properties["stat"] = stat
    return {"type": "metric", "x": x, "y": y, "width": 6, "height": 6, "properties": properties}


# -- the user's own resources --------------------------------------------------------------------


def _merge_extra(template: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for section in SECTIONS_USERS_MAY_EXTEND:
        additions = extra.get(section) or {}
        taken = set(template[section]) & set(additions)
        if taken:
            raise ConfigError(
                "infra/template-extra.yaml",
                f"{section}.{sorted(taken)[0]}",
                "is a name jobkit's generated template uses; pick another",
            )
        template[section].update(additions)


def _cloudformation_loader() -> type[Any]:
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader that reads CloudFormation's short tags (!Ref, !GetAtt, ...) as their long forms."""

    def construct(loader: Any, tag_suffix: str, node: Any) -> dict[str, Any]:
        name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag_suffix == "GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {name: value}

    Loader.add_multi_constructor("!", construct)
    return Loader


_CloudFormationLoader = _cloudformation_loader()
