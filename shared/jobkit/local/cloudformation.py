"""The deployed stack, locally: template.yaml through aws-sam-translator into
moto's CloudFormation, so what runs locally is what deploys.

Needs ``aws-sam-translator`` (the ``dev`` extra). Translation is offline: it
needs a region, no credentials.

moto differences this module works around (AWS behaves as the template says):

- moto's CloudFormation ignores a table's ``TimeToLiveSpecification``; the
  TTL is switched on afterwards with the template's own attribute name.
- moto's event source mappings invoke the function (in Docker) when a message
  arrives; the local stack runs its own emulator instead, so moto's trigger is
  taken off each queue, and the mappings stay as deployed, to be read
  (:mod:`jobkit.local.moto_patches.lambda_model`).
- moto skips ``AWS::CloudWatch::Alarm`` and ``AWS::SNS::Subscription``: the
  alarms are created afterwards as the template declares them (not evaluated).
- moto has no ``AWS::Lambda::Url`` (the push endpoint's function URL): it is
  left out, with the outputs that name it; the local stack serves the push
  endpoint itself (:mod:`jobkit.local.push_route`).
"""

from __future__ import annotations

import contextlib
import io
import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.local.moto_patches.lambda_model import detach_triggers

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

ARTIFACT_BUCKET = "jobkit-local-artifacts"
CODE_PROPERTIES = {"AWS::Serverless::Function": "CodeUri", "AWS::Serverless::LayerVersion": "ContentUri"}
#: Resource types moto's CloudFormation cannot create.
NOT_IN_MOTO = frozenset({"AWS::Lambda::Url"})
#: Resource types moto's CloudFormation skips and the local stack stands in for
#: (alarms created by :func:`_create_alarms`, schedules fired by the local
#: scheduler, domain rules read from the log lines): no warning for them.
STOOD_IN_FOR = ("AWS::CloudWatch::Alarm", "AWS::Scheduler::Schedule", "AWS::CloudWatch::InsightRule")


@dataclass(frozen=True)
class DeployedStack:
    name: str
    outputs: dict[str, str]
    template: dict[str, Any]  # the translated (CloudFormation) template
    functions: dict[str, dict[str, Any]]  # every Lambda function's properties, nested stacks' too, by logical ID


def load_template(path: Path) -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    parsed: dict[str, Any] = yaml_parse(path.read_text())
    return parsed


def translate(
    sam_template: Mapping[str, Any],
    *,
    region: str = "us-east-1",
    bucket: str = ARTIFACT_BUCKET,
    parameters: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """SAM -> CloudFormation, as `sam deploy` does, with code locations in ``bucket``."""
    import copy

    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    template = copy.deepcopy(dict(sam_template))
    for logical_id, resource in template.get("Resources", {}).items():
        code_property = CODE_PROPERTIES.get(resource.get("Type", ""))
        if code_property:
            resource["Properties"][code_property] = {"Bucket": bucket, "Key": f"{logical_id}.zip"}
    translator = Translator(
        managed_policy_map=None, sam_parser=Parser(), boto_session=boto3.Session(region_name=region)
    )
    translated: dict[str, Any] = translator.translate(
        template, parameter_values=dict(parameters or {}), get_managed_policy_map=lambda: {}
    )
    return translated


def deploy(
    clients: Any,
    sam_template: Mapping[str, Any],
    *,
    stack_name: str,
    parameters: Mapping[str, str],
    region: str = "us-east-1",
    base_dir: Path | None = None,
) -> DeployedStack:
    """Create the stack in the (emulated) account. ``clients(service)`` makes a boto3 client.

    Nested stacks (``AWS::Serverless::Application`` whose ``Location`` is a
    template file beside this one, in ``base_dir``) are packaged as
    ``sam deploy`` packages them: each is transformed and uploaded, and its
    location becomes the upload's URL."""
    import json

    s3, cloudformation = clients("s3"), clients("cloudformation")
    s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    sam_template = _packaged(s3, sam_template, region, base_dir or Path("."), "")
    template = translate(sam_template, region=region, parameters=parameters)
    with _quiet_about(STOOD_IN_FOR):
        cloudformation.create_stack(
            StackName=stack_name,
            TemplateBody=json.dumps(_for_moto(template)),
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
        )
        stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
        if stack["StackStatus"] != "CREATE_COMPLETE":
            raise RuntimeError(f"stack {stack_name} is {stack['StackStatus']}: {stack.get('StackStatusReason')}")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        detach_triggers()  # the mappings stay as deployed; the local stack's emulator polls
        _create_alarms(clients, stack_name, template, s3)
        _enable_ttl(clients("dynamodb"), template, outputs)
    return DeployedStack(stack_name, outputs, template, _functions(s3, template))


@contextlib.contextmanager
def _quiet_about(resource_types: Sequence[str]) -> Iterator[None]:
    """No "not supported" warning (a log line and a Python warning each) from
    moto's CloudFormation for resources the local stack stands in for."""
    import logging
    import warnings

    def wanted(record: logging.LogRecord) -> bool:
        return not any(t in record.getMessage() for t in resource_types)

    logger = logging.getLogger("moto")
    logger.addFilter(wanted)
    try:
        with warnings.catch_warnings():
            for resource_type in resource_types:
                warnings.filterwarnings("ignore", message=f".*{re.escape(resource_type)}.*not supported")
            yield
    finally:
        logger.removeFilter(wanted)


def _packaged(s3: Any, sam_template: Mapping[str, Any], region: str, base_dir: Path, scope: str) -> dict[str, Any]:
    """The template with its code and its nested stacks in the artifact bucket,
    as ``sam package`` leaves it (``scope`` keeps nested stacks' keys apart)."""
    import copy
    import json

    template = copy.deepcopy(dict(sam_template))
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") in CODE_PROPERTIES:  # translate() points the code here
            s3.put_object(Bucket=ARTIFACT_BUCKET, Key=f"{logical_id}.zip", Body=_placeholder_zip())
        location = resource.get("Properties", {}).get("Location")
        if resource.get("Type") == "AWS::Serverless::Application" and isinstance(location, str):
            child = load_template(base_dir / location)
            packaged = _packaged(s3, child, region, base_dir, f"{scope}{logical_id}/")
            body = json.dumps(translate(packaged, region=region))
            key = f"{scope}{logical_id}.template.json"
            s3.put_object(Bucket=ARTIFACT_BUCKET, Key=key, Body=body.encode("utf-8"))
            resource["Properties"]["Location"] = f"https://s3.amazonaws.com/{ARTIFACT_BUCKET}/{key}"
    return template


def _functions(s3: Any, template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The Lambda functions of a translated template and of its nested stacks'."""
    import json

    found: dict[str, dict[str, Any]] = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") == "AWS::Lambda::Function":
            found[logical_id] = resource.get("Properties", {})
        url = resource.get("Properties", {}).get("TemplateURL")
        if resource.get("Type") == "AWS::CloudFormation::Stack" and isinstance(url, str):
            key = url.split(f"/{ARTIFACT_BUCKET}/", 1)[1]
            found.update(_functions(s3, json.loads(s3.get_object(Bucket=ARTIFACT_BUCKET, Key=key)["Body"].read())))
    return found


def _for_moto(template: dict[str, Any]) -> dict[str, Any]:
    """The template less the resources moto cannot create, and the outputs that name them."""
    resources = template["Resources"]
    left_out = {name for name, resource in resources.items() if resource.get("Type") in NOT_IN_MOTO}
    if not left_out:
        return template

    def names_one(value: Any) -> bool:
        if isinstance(value, dict):
            if value.get("Ref") in left_out:
                return True
            get_att = value.get("Fn::GetAtt")
            if isinstance(get_att, list) and get_att and get_att[0] in left_out:
                return True
            return any(names_one(v) for v in value.values())
        return isinstance(value, list) and any(names_one(v) for v in value)

    return {
        **template,
        "Resources": {n: r for n, r in resources.items() if n not in left_out and not names_one(r)},
        "Outputs": {n: o for n, o in template.get("Outputs", {}).items() if not names_one(o)},
    }


def _create_alarms(clients: Any, stack_name: str, template: Mapping[str, Any], s3: Any) -> None:
    """Create the alarms moto's CloudFormation skips, as the stack (and its nested
    stacks) declare them: the same metrics, dimensions and thresholds, named
    ``{stack}-{logical ID}``. moto does not evaluate them; they are there to be read."""
    import json

    cloudformation, cloudwatch = clients("cloudformation"), clients("cloudwatch")
    described = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    parameters = {p["ParameterKey"]: p["ParameterValue"] for p in described.get("Parameters", [])}
    for name, declared in template.get("Parameters", {}).items():
        if name not in parameters and "Default" in declared:
            parameters[name] = str(declared["Default"])
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
        if "LogicalResourceId" in r and "PhysicalResourceId" in r  # (not what moto skipped)
    }
    resolver = _Resolver(parameters, physical, template.get("Conditions", {}))
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") == "AWS::CloudWatch::Alarm":
            properties = resolver.resolve(resource["Properties"])
            properties["Threshold"] = float(properties["Threshold"])
            for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
                if key in properties:
                    properties[key] = int(properties[key])
            cloudwatch.put_metric_alarm(AlarmName=f"{stack_name}-{logical_id}", **properties)
        url = resource.get("Properties", {}).get("TemplateURL")
        if resource.get("Type") == "AWS::CloudFormation::Stack" and isinstance(url, str):
            key = url.split(f"/{ARTIFACT_BUCKET}/", 1)[1]
            child = json.loads(s3.get_object(Bucket=ARTIFACT_BUCKET, Key=key)["Body"].read())
            _create_alarms(clients, physical[logical_id], child, s3)


class _Resolver:
    """Resolves the intrinsic functions of a deployed resource's properties, as
    CloudFormation did: parameters, physical IDs, a queue's name, conditions."""

    _NONE = object()

    def __init__(self, parameters: Mapping[str, str], physical: Mapping[str, str], conditions: Mapping[str, Any]):
        self._parameters, self._physical, self._conditions = parameters, physical, conditions

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.resolve(item) for item in node) if v is not self._NONE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Fn::GetAtt":
                return self._get_att(*arg)
            if key == "Fn::If":
                return self.resolve(arg[1] if self._condition(arg[0]) else arg[2])
            if key == "Fn::Sub" and isinstance(arg, str):
                import re

                return re.sub(r"\$\{([A-Za-z0-9:]+)\}", lambda m: str(self._ref(m.group(1))), arg)
        resolved = {key: self.resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not self._NONE}

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return self._NONE
        if name in self._parameters:
            return self._parameters[name]
        return self._physical[name]

    def _get_att(self, name: str, attribute: str) -> str:
        physical = self._physical[name]
        if attribute == "QueueName":
            return physical.rstrip("/").rsplit("/", 1)[-1]
        raise ValueError(f"the local stack cannot resolve {name}.{attribute} for an alarm")

    def _condition(self, name: str) -> bool:
        return bool(self._evaluate(self._conditions[name]))

    def _evaluate(self, node: Any) -> Any:
        if isinstance(node, dict) and len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Fn::Not":
                return not self._evaluate(arg[0])
            if key == "Fn::Equals":
                return self._evaluate(arg[0]) == self._evaluate(arg[1])
            if key == "Ref":
                return self._ref(arg)
        return node


def _enable_ttl(dynamodb: DynamoDBClient, template: Mapping[str, Any], outputs: Mapping[str, str]) -> None:
    for resource in template["Resources"].values():
        ttl = resource.get("Properties", {}).get("TimeToLiveSpecification")
        if resource["Type"] == "AWS::DynamoDB::Table" and ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=outputs["JobsTableName"],
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )


def _placeholder_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README", "placeholder: the local stack runs the code in-process\n")
    return buffer.getvalue()
