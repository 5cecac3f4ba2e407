"""template.yaml, generated from the declaration (``jobkit template``).

Per declared queue: an SQS queue and its DLQ, a runner function with an SQS
event source, alarms, and a Contributor Insights rule that counts its jobs by
domain; per job type: a pickup-delay alarm (and for a type with a concurrency
or rate limit, an alarm when the limit starves it) and dashboard widgets;
once: the jobkit layer, the jobs table, an optional alarm topic and the
dashboard. Every runner gets least-privilege IAM: it may consume only its own
queue, send only to its own queue (delay hops and deferrals), the queues of the
types its jobs push, and its own DLQ, and use only the kinds of record it uses
of its own types in the jobs table, plus the root records of the types its jobs
push (``dynamodb:LeadingKeys``, see :func:`jobkit.records.keys.kinds_used`). Apps that push attach
the ``ProducerPolicy`` managed policy. What is stored where, and who may read
it: docs/security.md.

Resources of the user's own (an S3 bucket the jobs write to, say) go in
``infra/template-extra.yaml``; they are merged in and never overwritten.

This module composes the template from the others: :mod:`.parameters`,
:mod:`.resources` (queues, table, functions, event source mappings, log groups),
:mod:`.iam`, :mod:`.alarms`, :mod:`.insight` (the busiest domains), :mod:`.dashboard`, :mod:`.extra` (the user's
sections), :mod:`.checkov` (the findings that do not apply), :mod:`.naming`
(logical IDs and resource names) and :mod:`.cfn_yaml`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jobkit.core.errors import ConfigError
from jobkit.core.resources import ARCHITECTURE, RUNTIME
from jobkit.declaration.config import Declaration, QueueConfig
from jobkit.template import stacks
from jobkit.template.alarms import alarm_topic, conditions, limit_alarms, queue_alarms, type_alarms
from jobkit.template.cfn_yaml import to_yaml
from jobkit.template.checkov import CHECKOV_SKIPS
from jobkit.template.dashboard import dashboard
from jobkit.template.endpoint import endpoint_outputs, endpoint_resources
from jobkit.template.extra import SECTIONS_USERS_MAY_EXTEND, load_extra, merge_extra
from jobkit.template.iam import RUNNER_TABLE_ACTIONS, operator_policy, producer_policy
from jobkit.template.insight import domain_rule
from jobkit.template.naming import logical_id
from jobkit.template.parameters import LOG_RETENTION_DAYS, parameters
from jobkit.template.payload_bucket import payload_outputs
from jobkit.template.resources import (
    MAX_ENVIRONMENT_BYTES,
    queue_outputs,
    queue_resources,
    shared_resources,
)
from jobkit.template.schedules import schedule_resources

__all__ = [
    "ARCHITECTURE",
    "CHECKOV_SKIPS",
    "HEADER",
    "LOG_RETENTION_DAYS",
    "MAX_ENVIRONMENT_BYTES",
    "RUNNER_TABLE_ACTIONS",
    "RUNTIME",
    "SECTIONS_USERS_MAY_EXTEND",
    "build",
    "build_all",
    "load_extra",
    "logical_id",
    "render",
    "render_all",
]

HEADER = (
    "# Generated from infra/jobs.toml by `jobkit template`. Do not edit: edit the declaration,\n"
    "# or add resources of your own to infra/template-extra.yaml, and run `jobkit template` again.\n"
)


def render(declaration: Declaration, extra: Mapping[str, Any] | None = None, *, base_dir: Path | None = None) -> str:
    """The SAM template for a declaration, as YAML text (the root, if it nests stacks)."""
    return HEADER + to_yaml(build(declaration, extra, base_dir=base_dir))


def render_all(
    declaration: Declaration,
    extra: Mapping[str, Any] | None = None,
    *,
    base_dir: Path | None = None,
    template_name: str = "template.yaml",
) -> dict[str, str]:
    """Every template file for a declaration, by file name (beside the root):
    the root, and its nested stacks' when it has any (:mod:`.stacks`)."""
    built = build_all(declaration, extra, base_dir=base_dir, template_name=template_name)
    return {name: HEADER + to_yaml(template) for name, template in built.items()}


def build(
    declaration: Declaration, extra: Mapping[str, Any] | None = None, *, base_dir: Path | None = None
) -> dict[str, Any]:
    """The SAM template for a declaration, as a dict (the root, if it nests stacks).

    Args:
        base_dir: the template's directory, which its code paths are relative to
            (default: the current directory).
    """
    return build_all(declaration, extra, base_dir=base_dir)["template.yaml"]


def build_all(
    declaration: Declaration,
    extra: Mapping[str, Any] | None = None,
    *,
    base_dir: Path | None = None,
    template_name: str = "template.yaml",
) -> dict[str, dict[str, Any]]:
    """Every template of a declaration, by file name: the root as ``template_name``.

    Raises:
        ConfigError: a template CloudFormation would refuse (over its limits).
    """
    base_dir = base_dir if base_dir is not None else Path.cwd()
    root: dict[str, Any] = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Description": "jobkit: a job queue on SQS, Lambda and DynamoDB (generated from infra/jobs.toml)",
        "Parameters": parameters(declaration),
        "Conditions": conditions(),
        "Resources": {
            **shared_resources(declaration, base_dir),
            "AlarmTopic": alarm_topic(),
            "ProducerPolicy": producer_policy(declaration),
            "OperatorPolicy": operator_policy(declaration),
        },
        "Outputs": {
            "JobsTableName": {"Description": "The jobs table", "Value": {"Ref": "JobsTable"}},
            **payload_outputs(),
            "ProducerPolicyArn": {
                "Description": "The managed policy an app's role attaches to push jobs",
                "Value": {"Ref": "ProducerPolicy"},
            },
            "OperatorPolicyArn": {
                "Description": "The managed policy an operator's role attaches for jobkit verify and the ops commands",
                "Value": {"Ref": "OperatorPolicy"},
            },
        },
    }
    resources, outputs = root["Resources"], root["Outputs"]
    per_queue = {queue.name: _queue_parts(declaration, queue, base_dir) for queue in declaration.queues.values()}
    templates: dict[str, dict[str, Any]] = {template_name: root}
    if not stacks.nested(declaration):
        for queue in declaration.queues.values():
            _add(declaration, resources, per_queue[queue.name]["resources"])
            _add(declaration, outputs, queue_outputs(queue))
        _add(declaration, resources, {k: v for q in per_queue.values() for k, v in q["rules"].items()})
    else:
        buckets: dict[int, dict[str, Any]] = {}
        for name in sorted(per_queue):
            part = buckets.setdefault(stacks.bucket(name), {})
            _add(declaration, part, per_queue[name]["resources"])
            _add(declaration, part, per_queue[name]["rules"])
            _add(declaration, part, per_queue[name]["types"])
        for number, part in sorted(buckets.items()):
            child = stacks.child_file(template_name, number)
            templates[child] = stacks.child_template(declaration, number, part, root["Parameters"])
            resources[stacks.stack_id(number)] = stacks.stack_resource(number, child, root["Parameters"])
    _add(declaration, resources, schedule_resources(declaration))
    _add(declaration, resources, endpoint_resources(declaration))
    _add(declaration, outputs, endpoint_outputs(declaration))
    if not stacks.nested(declaration):
        for job_type in declaration.types.values():
            _add(declaration, resources, type_alarms(declaration, job_type.name))
            _add(declaration, resources, limit_alarms(declaration, job_type))
    _add(declaration, resources, {"Dashboard": dashboard(declaration)})
    if extra:
        merge_extra(root, extra)
    if stacks.nested(declaration):  # the root's references to the queues, which live in nested stacks now
        root["Resources"] = {
            name: stacks.named_across(declaration, value, set(resources), child=False)
            for name, value in resources.items()
        }
    for name, template in templates.items():
        stacks.check_limits(declaration.source, name, template)
    return templates


def _queue_parts(declaration: Declaration, queue: QueueConfig, base_dir: Path) -> dict[str, dict[str, Any]]:
    """A queue's resources: its own and its alarms, its insight rule, and its types' alarms."""
    own = {**queue_resources(declaration, queue, base_dir), **queue_alarms(queue)}
    types: dict[str, Any] = {}
    for name in queue.types:
        types.update(type_alarms(declaration, name))
        types.update(limit_alarms(declaration, declaration.types[name]))
    return {"resources": own, "rules": domain_rule(queue.name), "types": types}


def _add(declaration: Declaration, section: dict[str, Any], new: Mapping[str, Any]) -> None:
    """Add ``new`` to a template section, refusing a logical ID that is already
    there: a resource silently replaced would be missing on AWS alone."""
    for name, value in new.items():
        if name in section:
            raise ConfigError(
                declaration.source,
                "types",
                f"two declared names give the template's logical ID {name}: rename one",
            )
        section[name] = value
