"""Nested stacks: a declaration of MediaWiki's size (about 100 job types) in
CloudFormation's limits.

A stack takes at most 500 resources, 200 outputs and a template of 1 MB, and
each queue costs about a dozen resources once SAM has transformed the
template (its queue and DLQ, its runner and the runner's role, a log group,
an event source mapping, three alarms, an insight rule, and an alarm or two
per type). Up to :data:`INLINE_QUEUES` queues (a priority lane counting as
one) the template is one stack.
Past that, the queues and everything of theirs go into :data:`BUCKETS`
nested stacks (``AWS::Serverless::Application``, each a template file beside
``template.yaml``), and the root keeps what is shared: the layer, the jobs
table, the alarm topic, the producer policy, schedules, the push endpoint and
the dashboard.

A queue's stack is a hash of its name, so adding or removing a queue never
moves another queue from one stack to another (a move would replace its
queue, and lose what it holds). Crossing :data:`INLINE_QUEUES` moves every
queue once: ``jobkit template`` says so.

Across stacks, resources are named, never referenced: a queue in another
stack is its ARN and URL spelled from its name (``${Prefix}-{queue}``, the
Region, the account), and the root hands each nested stack its parameters,
the layer, the table's ARN and the alarm topic.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from typing import Any

from jobkit.core.errors import ConfigError
from jobkit.core.resources import PREFIX_PARAMETER
from jobkit.declaration.config import Declaration
from jobkit.template.naming import NAMES, QueueIds

#: Queues a single stack holds; more go into nested stacks.
INLINE_QUEUES = 30
#: The nested stacks a declaration's queues are spread over, by a hash of each name.
BUCKETS = 8
#: CloudFormation's limits on one stack, after the SAM transform.
MAX_RESOURCES, MAX_OUTPUTS, MAX_PARAMETERS = 500, 200, 200
#: The largest template CloudFormation takes (from S3, as `sam deploy` uploads it).
MAX_TEMPLATE_BYTES = 1_000_000

#: What a nested stack gets from the root: its own parameters, and the shared resources.
PASSED_PARAMETERS = (PREFIX_PARAMETER, "PickupDelayAlarmMs", "OldestMessageAlarmSeconds", "LogRetentionDays")
LAYER, TABLE_ARN, TOPIC_ARN = "LayerArn", "JobsTableArn", "AlarmTopicArn"
PAYLOAD_BUCKET = "PayloadBucketName"


def bucket(queue: str) -> int:
    """The nested stack of a queue: stable whatever other queues are declared."""
    return zlib.crc32(queue.encode("utf-8")) % BUCKETS + 1


def nested(declaration: Declaration) -> bool:
    """Whether the queues go into nested stacks: past :data:`INLINE_QUEUES`,
    each priority lane counted as a queue (its queue, DLQ, event source
    mapping, two alarms and four outputs are nearly half a queue's resources)."""
    return len(declaration.lanes) > INLINE_QUEUES


def stack_id(number: int) -> str:
    return f"QueueStack{number}"


def child_file(template_name: str, number: int) -> str:
    """``template.yaml`` -> ``template.queues-3.yaml``, beside it."""
    stem, dot, suffix = template_name.rpartition(".")
    return f"{stem}.queues-{number}.{suffix}" if dot else f"{template_name}.queues-{number}"


def child_template(
    declaration: Declaration, number: int, resources: Mapping[str, Any], root_parameters: Mapping[str, Any]
) -> dict[str, Any]:
    """The nested stack of one bucket of queues."""
    parameters = {name: dict(root_parameters[name]) for name in PASSED_PARAMETERS if name in root_parameters}
    for name in root_parameters:  # a limit's alarm threshold, when a type declares a limit
        if name not in parameters and name != "AlarmEmail":
            parameters[name] = dict(root_parameters[name])
    parameters[LAYER] = {"Type": "String", "Description": "The jobkit layer's version ARN"}
    parameters[TABLE_ARN] = {"Type": "String", "Description": "The jobs table's ARN"}
    parameters[PAYLOAD_BUCKET] = {"Type": "String", "Description": "The payload bucket's name"}
    parameters[TOPIC_ARN] = {"Type": "String", "Default": "", "Description": "The alarm topic's ARN; empty for none"}
    local = set(resources)
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Description": f"jobkit: queues of stack {number} of {BUCKETS} (generated from infra/jobs.toml)",
        "Parameters": parameters,
        "Conditions": {"HasAlarmEmail": {"Fn::Not": [{"Fn::Equals": [{"Ref": TOPIC_ARN}, ""]}]}},
        "Resources": {name: named_across(declaration, value, local, child=True) for name, value in resources.items()},
    }


def stack_resource(number: int, location: str, root_parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The root's resource for a nested stack."""
    passed = {name: {"Ref": name} for name in root_parameters if name != "AlarmEmail"}
    return {
        "Type": "AWS::Serverless::Application",
        "Properties": {
            "Location": location,
            "Parameters": {
                **passed,
                LAYER: {"Ref": "JobkitLayer"},
                TABLE_ARN: {"Fn::GetAtt": ["JobsTable", "Arn"]},
                PAYLOAD_BUCKET: {"Ref": "PayloadBucket"},
                TOPIC_ARN: {"Fn::If": ["HasAlarmEmail", {"Ref": "AlarmTopic"}, ""]},
            },
        },
    }


def named_across(declaration: Declaration, value: Any, local: set[str], *, child: bool) -> Any:
    """``value`` with every reference to a queue outside ``local`` spelled from
    its name (its ARN, URL or name), and, in a nested stack, the root's
    resources as the nested stack's parameters."""
    queues = _queue_ids(declaration)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref" and isinstance(arg, str):
                return _ref(arg, queues, local, child)
            if key == "Fn::GetAtt" and isinstance(arg, list) and len(arg) == 2:
                return _get_att(arg[0], arg[1], queues, local, child)
            if key == "Fn::Sub" and isinstance(arg, str):
                return {"Fn::Sub": _sub(arg, queues, local)}
        return {key: walk(item) for key, item in node.items()}

    return walk(value)


def _queue_ids(declaration: Declaration) -> dict[str, str]:
    """Logical ID of every queue and DLQ -> its name as the template spells it."""
    ids: dict[str, str] = {}
    for lane in (lane for queue in declaration.queues.values() for lane in queue.lanes):
        ids[QueueIds(lane.key).queue] = NAMES.queue(lane.key)
        ids[QueueIds(lane.key).dlq] = NAMES.dlq(lane.key)
    return ids


def _url(name: str) -> str:
    return "https://sqs.${AWS::Region}.${AWS::URLSuffix}/${AWS::AccountId}/" + name


def _arn(name: str) -> str:
    return "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:" + name


def _ref(target: str, queues: Mapping[str, str], local: set[str], child: bool) -> Any:
    if target in queues and target not in local:
        return {"Fn::Sub": _url(queues[target])}
    if child and target == "JobkitLayer":
        return {"Ref": LAYER}
    if child and target == "AlarmTopic":
        return {"Ref": TOPIC_ARN}
    if child and target == "PayloadBucket":
        return {"Ref": PAYLOAD_BUCKET}
    return {"Ref": target}


def _get_att(target: str, attribute: str, queues: Mapping[str, str], local: set[str], child: bool) -> Any:
    if target in queues and target not in local:
        if attribute == "Arn":
            return {"Fn::Sub": _arn(queues[target])}
        if attribute == "QueueName":
            return {"Fn::Sub": queues[target]}
        raise ValueError(f"no name-spelled form of {target}.{attribute}")
    if child and (target, attribute) == ("JobsTable", "Arn"):
        return {"Ref": TABLE_ARN}
    if child and (target, attribute) == ("PayloadBucket", "Arn"):
        return {"Fn::Sub": "arn:${AWS::Partition}:s3:::${" + PAYLOAD_BUCKET + "}"}
    return {"Fn::GetAtt": [target, attribute]}


def _sub(text: str, queues: Mapping[str, str], local: set[str]) -> str:
    def one(found: re.Match[str]) -> str:
        target = found.group(1)
        return _url(queues[target]) if target in queues and target not in local else found.group(0)

    return re.sub(r"\$\{([A-Za-z0-9]+)\}", one, text)


def check_limits(source: str, name: str, template: Mapping[str, Any]) -> None:
    """Refuse a template that CloudFormation would refuse after the SAM transform."""
    resources, outputs, parameters, size = transformed_counts(template)
    for what, count, limit in (
        ("resources", resources, MAX_RESOURCES),
        ("outputs", outputs, MAX_OUTPUTS),
        ("parameters", parameters, MAX_PARAMETERS),
        ("bytes", size, MAX_TEMPLATE_BYTES),
    ):
        if count > limit:
            raise ConfigError(
                source,
                "types",
                f"{name} would hold {count} {what} once SAM transforms it, over CloudFormation's {limit}:"
                ' put rare types on a shared queue (queue = "lowTraffic"), or declare fewer priority lanes',
            )


def transformed_counts(template: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(resources, outputs, parameters, bytes) of a template after the SAM
    transform, counted without it: a function brings its execution role, and a
    function URL its permission; the size is the JSON the transform writes,
    with a margin for what it adds."""
    import json

    resources = 0
    for resource in template.get("Resources", {}).values():
        resources += 1
        if resource.get("Type") == "AWS::Serverless::Function":
            resources += 1  # its role
            if "FunctionUrlConfig" in resource.get("Properties", {}):
                resources += 2  # the URL and its permission
    size = len(json.dumps(template, separators=(",", ":")).encode("utf-8"))
    return resources, len(template.get("Outputs", {})), len(template.get("Parameters", {})), int(size * 1.15)
