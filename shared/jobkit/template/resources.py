"""The template's resources that do the work: the jobkit layer and the jobs table
once; per declared queue, an SQS queue and its DLQ, a runner function, its log
group and its event source mapping."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobkit.core.errors import ConfigError
from jobkit.core.resources import (
    ARCHITECTURE,
    DLQ_RETENTION_S,
    HANDLER,
    LONGEST_PREFIX,
    PREFIX_PARAMETER,
    QUEUE_RETENTION_S,
    RUNNER_RECURSIVE_LOOP,
    RUNTIME,
    TABLE_KEYS,
    TTL_ATTRIBUTE,
    ResourceNames,
)
from jobkit.declaration.config import Declaration, QueueConfig, declaration_to_dict
from jobkit.sam.makefile import makefile_path
from jobkit.sam.runner import code_package
from jobkit.sqs.limits import MAX_MESSAGE_BYTES
from jobkit.template.checkov import checkov_skips
from jobkit.template.iam import pushed_types, runner_policy, sendable_queues, traced
from jobkit.template.naming import NAMES, QueueIds
from jobkit.template.payload_bucket import BUCKET_ID, PAYLOAD_VARIABLE, payload_resources
from jobkit.template.policy_size import MAX_ROLE_POLICY_CHARS, check_policy

MAX_ENVIRONMENT_BYTES = 4096  # Lambda's limit on all environment variables together


def shared_resources(declaration: Declaration, base_dir: Path) -> dict[str, Any]:
    """The jobkit layer and the jobs table."""
    import jobkit

    build = _build_dir(declaration, base_dir)
    return {
        "JobkitLayer": {
            "Type": "AWS::Serverless::LayerVersion",
            "Properties": {
                "Description": f"jobkit-aws {jobkit.__version__} and its runtime dependencies",
                "ContentUri": build + "/",
                "CompatibleRuntimes": [RUNTIME],
                "CompatibleArchitectures": [ARCHITECTURE],
                "RetentionPolicy": "Delete",
            },
            # The generated Makefile copies the installed jobkit and cross-installs
            # its dependencies for the Lambda runtime with pip (--python-version,
            # --platform), so `sam build` needs no matching local Python and no
            # container (see jobkit.sam).
            "Metadata": {"BuildMethod": "makefile", "BuildArchitecture": ARCHITECTURE, "ContextPath": build},
        },
        "JobsTable": jobs_table(),
        **payload_resources(),
    }


def queue_resources(declaration: Declaration, queue: QueueConfig, base_dir: Path) -> dict[str, Any]:
    """A declared queue, its DLQ, and the runner function that consumes it."""
    ids = QueueIds(queue.name)
    queues = sqs_queues(queue)
    resources = {
        **queues,
        ids.runner: _runner_function(declaration, queue, base_dir),
        # Declared, rather than left to Lambda to create on first write, so that its
        # logs expire. The runner logs to it by name and by LoggingConfig.
        ids.log_group: {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {
                "LogGroupName": {"Fn::Sub": NAMES.log_group(queue.name)},
                "RetentionInDays": {"Ref": "LogRetentionDays"},
            },
            "Metadata": checkov_skips("CKV_AWS_158"),
        },
        # The event source mapping is declared here rather than as the function's
        # SAM `Events`: for an SQS event SAM attaches the managed policy
        # AWSLambdaSQSQueueExecutionRole, which allows receiving and deleting on
        # every queue in the account ("Resource": "*"). The runner's own policy
        # already lets it consume its queue, and nothing else. (The logical ID is
        # the one SAM gave it.)
        # One per lane, each with the lane's share of the runner (jobkit.declaration.lanes).
        **{
            QueueIds(lane.key).event_source_mapping: {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {
                    "EventSourceArn": {"Fn::GetAtt": [QueueIds(lane.key).queue, "Arn"]},
                    "FunctionName": {"Ref": ids.runner},
                    "BatchSize": queue.batch_size,
                    "MaximumBatchingWindowInSeconds": queue.batch_window_s,
                    "FunctionResponseTypes": ["ReportBatchItemFailures"],
                    "ScalingConfig": {"MaximumConcurrency": lane.max_concurrency},
                },
            }
            for lane in queue.lanes
        },
    }
    # every lane's IDs are their own (a clash would silently drop a resource here, and on AWS)
    if len(resources) != 3 * len(queue.lanes) + 2:  # a queue and a DLQ a lane, its mapping; the runner, its logs
        raise ConfigError(
            declaration.source,
            f"types.{queue.types[0]}.priorities",
            f"queue {queue.name!r}: its lanes' resources would share logical IDs with its own: rename the lane",
        )
    return resources


def jobs_table() -> dict[str, Any]:
    """The jobs table. The local stack creates it from these properties too
    (:mod:`jobkit.local.provision`)."""
    pk, sk = TABLE_KEYS
    return {
        "Type": "AWS::DynamoDB::Table",
        # Kept when the stack is deleted or the table replaced, but not when the stack's
        # first create fails: a table kept then, under its fixed name, would make every
        # retry fail with "already exists"
        "DeletionPolicy": "RetainExceptOnCreate",
        "UpdateReplacePolicy": "Retain",
        "Properties": {
            "TableName": {"Fn::Sub": NAMES.table},
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
        "Metadata": checkov_skips("CKV_AWS_119"),
    }


def sqs_queues(queue: QueueConfig) -> dict[str, Any]:
    """A declared queue and its DLQ, and each of its priority lanes' queue and
    DLQ. The local stack creates them from these properties too
    (:mod:`jobkit.local.provision`)."""
    resources: dict[str, Any] = {}
    for lane in queue.lanes:
        ids = QueueIds(lane.key)
        resources[ids.dlq] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": {"Fn::Sub": NAMES.dlq(lane.key)},
                "MessageRetentionPeriod": DLQ_RETENTION_S,
                "MaximumMessageSize": MAX_MESSAGE_BYTES,
                "SqsManagedSseEnabled": True,
            },
            "Metadata": checkov_skips("CKV_AWS_27"),
        }
        resources[ids.queue] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": {"Fn::Sub": NAMES.queue(lane.key)},
                "VisibilityTimeout": queue.visibility_timeout_s,
                "MessageRetentionPeriod": QUEUE_RETENTION_S,
                # set, not left to the default: a queue created before SQS raised its limit to
                # 1 MiB keeps 256 KiB unless told, and jobkit pushes jobs of up to 1 MiB
                "MaximumMessageSize": MAX_MESSAGE_BYTES,
                "SqsManagedSseEnabled": True,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": [ids.dlq, "Arn"]},
                    "maxReceiveCount": queue.max_receive_count,
                },
            },
            "Metadata": checkov_skips("CKV_AWS_27"),
        }
    return resources


def queue_outputs(queue: QueueConfig) -> dict[str, Any]:
    """The URLs and ARNs of a declared queue and its DLQ, and of each of its lanes'."""
    outputs: dict[str, Any] = {}
    for lane in queue.lanes:
        ids = QueueIds(lane.key)
        what = f"queue {queue.name}" if lane.priority is None else f"lane {lane.priority} of queue {queue.name}"
        outputs[ids.queue_url_output] = {"Description": f"URL of {what}", "Value": {"Ref": ids.queue}}
        outputs[ids.queue_arn_output] = {"Description": f"ARN of {what}", "Value": {"Fn::GetAtt": [ids.queue, "Arn"]}}
        outputs[ids.dlq_url_output] = {"Description": f"URL of the DLQ of {what}", "Value": {"Ref": ids.dlq}}
        outputs[ids.dlq_arn_output] = {
            "Description": f"ARN of the DLQ of {what}",
            "Value": {"Fn::GetAtt": [ids.dlq, "Arn"]},
        }
    return outputs


def _runner_function(declaration: Declaration, queue: QueueConfig, base_dir: Path) -> dict[str, Any]:
    ids = QueueIds(queue.name)
    subset = declaration_to_dict(
        declaration, only_types=set(queue.types) | pushed_types(declaration, queue), defaults=False
    )
    subset["jobkit"].pop("prefix")  # the stack's Prefix parameter names the resources
    declaration_json = json.dumps(subset, separators=(",", ":"), sort_keys=True)
    # (a lane's URL is its queue's with the lane's name: the runner spells it, see QueueDirectory)
    urls = {NAMES.queue(name): f"${{{QueueIds(name).queue}}}" for name in sendable_queues(declaration, queue)}
    urls[NAMES.dlq(queue.name)] = f"${{{ids.dlq}}}"
    urls_json = json.dumps(urls, separators=(",", ":"), sort_keys=True)
    variables: dict[str, Any] = {
        "JOBKIT_DECLARATION": declaration_json,
        "JOBKIT_PREFIX": {"Ref": PREFIX_PARAMETER},
        "JOBKIT_QUEUE": queue.name,
        "JOBKIT_QUEUE_URLS": {"Fn::Sub": urls_json},
        **PAYLOAD_VARIABLE,
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    check_environment_size(
        declaration,
        f"types.{queue.types[0]}.queue",
        f"the runner of queue {queue.name!r}",
        "give some of its types (or the types they push) their own queue, or shorten their params_schema"
        " (a params_schema in a file ships in the declaration too)",
        variables,
    )
    policy = runner_policy(declaration, queue)
    check_policy(
        declaration,
        f"types.{queue.types[0]}.pushes",
        f"the policy of the runner of queue {queue.name!r}",
        policy,
        MAX_ROLE_POLICY_CHARS,
        "its types push types of too many queues and priority lanes, or have too many types: give some their own queue",
    )
    properties: dict[str, Any] = {
        "FunctionName": {"Fn::Sub": NAMES.runner(queue.name)},
        "Description": runner_description(queue),
        "CodeUri": _code_uri(declaration, base_dir),
        "Handler": HANDLER,
        "Runtime": RUNTIME,
        "Architectures": [ARCHITECTURE],
        "Timeout": queue.timeout_s,
        "MemorySize": queue.memory_mb,
        "Layers": [{"Ref": "JobkitLayer"}],
        "LoggingConfig": {"LogGroup": {"Ref": ids.log_group}},
        "Environment": {"Variables": variables},
        "Policies": [policy],
        # the runner's own chains of sends (hops, fan-outs, holds) are loops by design
        "RecursiveLoop": RUNNER_RECURSIVE_LOOP,
    }
    if traced(declaration, queue):  # a span per job of its traced types (jobkit.runner.stages.trace)
        properties["Tracing"] = "Active"
    return {
        "Type": "AWS::Serverless::Function",
        "Properties": properties,
        "Metadata": {
            "BuildMethod": "makefile",
            "BuildArchitecture": ARCHITECTURE,
            "ContextPath": _build_dir(declaration, base_dir),
            **checkov_skips("CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173"),
        },
    }


#: Lambda's limit on a function's description.
MAX_DESCRIPTION = 256


def runner_description(queue: QueueConfig) -> str:
    """The runner's description: its queue and types, as many as Lambda's 256 characters hold."""
    head = f"jobkit runner for queue {queue.name}: "
    for shown in range(len(queue.types), 0, -1):
        rest = len(queue.types) - shown
        text = head + ", ".join(queue.types[:shown]) + (f" and {rest} more" if rest else "")
        if len(text) <= MAX_DESCRIPTION:
            return text
    return f"jobkit runner for queue {queue.name}: {len(queue.types)} types"[:MAX_DESCRIPTION]


def _code_uri(declaration: Declaration, base_dir: Path) -> str:
    """What SAM copies and watches for a runner: the job package; the Makefile
    copies only the job package(s) into the function. With classes in several
    top-level packages, the Makefile's own directory, so that SAM does not copy
    the whole of ``code_dir`` (an app's root, with its virtualenv) per runner."""
    package = code_package(declaration)
    return _relative(package if package is not None else makefile_path(declaration).parent, base_dir) + "/"


def _build_dir(declaration: Declaration, base_dir: Path) -> str:
    """The generated Makefile's directory, relative to the template's."""
    return _relative(makefile_path(declaration).parent, base_dir)


def _relative(path: Path, base_dir: Path) -> str:
    return Path(os.path.relpath(path.resolve(), base_dir.resolve())).as_posix()


#: Where the longest queue URL of any Region and partition could be: a Region
#: name of 15 characters, the China partition's domain, a 12-digit account.
LONGEST_QUEUE_URL = "https://sqs.{region}.amazonaws.com.cn/{account}/{name}".format(
    region="x" * 15, account="1" * 12, name="{name}"
)


def environment_size(declaration: Declaration, variables: Mapping[str, Any]) -> int:
    """Bytes of a function's environment as Lambda measures them: the JSON of
    the variables map, key names, quotes, commas and brackets included, with
    every reference resolved at its longest: the prefix at 16 characters, a
    queue's URL in the longest Region and partition."""
    longest = ResourceNames(LONGEST_PREFIX)
    urls = {PREFIX_PARAMETER: LONGEST_PREFIX}
    for queue in declaration.queues:
        urls[QueueIds(queue).queue] = LONGEST_QUEUE_URL.format(name=longest.queue(queue))
        urls[QueueIds(queue).dlq] = LONGEST_QUEUE_URL.format(name=longest.dlq(queue))

    def name(logical_id: str) -> str:
        return urls[logical_id]  # a reference jobkit does not know fails the template loudly

    def resolved(value: Any) -> str:
        if isinstance(value, str):
            return value
        if value == {"Ref": PREFIX_PARAMETER}:
            return LONGEST_PREFIX
        if value == {"Ref": BUCKET_ID}:  # a bucket's name is at most 63 characters
            return "b" * 63
        if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
            return re.sub(r"\$\{([A-Za-z0-9]+)\}", lambda found: name(found.group(1)), value["Fn::Sub"])
        raise ValueError(f"an environment value jobkit cannot measure: {value!r}")

    text = json.dumps({key: resolved(value) for key, value in variables.items()}, separators=(",", ":"))
    return len(text.encode("utf-8"))


def check_environment_size(
    declaration: Declaration, key: str, function: str, remedy: str, variables: Mapping[str, Any]
) -> None:
    """Refuse a function whose environment variables would not fit in Lambda's
    4 KB, as Lambda measures them (:func:`environment_size`), saying what to do."""
    size = environment_size(declaration, variables)
    if size > MAX_ENVIRONMENT_BYTES:
        raise ConfigError(
            declaration.source,
            key,
            f"{function} would need {size} bytes of environment (as Lambda measures it, with its queue URLs and"
            f" prefix at their longest), over Lambda's {MAX_ENVIRONMENT_BYTES}: {remedy}",
        )
