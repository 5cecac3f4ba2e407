"""The Contributor Insights rules behind ``jobkit top --by domain``: which
domains keep a type busy, with no metric that has a domain dimension.

A metric dimension per domain would be one custom metric per domain (a wiki
farm has hundreds), billed monthly whether or not anyone looks. A Contributor
Insights rule instead reads the runner's log as it arrives and keeps its top
contributors: one rule per declared queue, over its runner's log group,
counting by ``job_type`` and ``domain`` the lines that carry ``run_time_ms``.
A runner writes exactly one such line per job that succeeded (the INFO line
"<type> <id> succeeded", Powertools' JSON, :mod:`jobkit.runner.loop`); its
EMF documents in the same log group name that figure ``RunTime``, so they
are not counted. Powertools leaves out a key whose value is None, so a job
without a domain has no ``domain`` key, and is not a contributor.

The definition is built here once, for the template (with the log group's name
as an ``Fn::Sub`` string) and for the CLI, which evaluates it itself where the
endpoint cannot (:mod:`jobkit.ops.domains`).
"""

from __future__ import annotations

import json
from typing import Any

from jobkit.core.resources import ResourceNames
from jobkit.declaration.config import Declaration
from jobkit.template.naming import NAMES, QueueIds, logical_id

#: The rule's contributor keys: a contributor is a (job type, domain) pair.
DOMAIN_RULE_KEYS = ("$.job_type", "$.domain")
#: The field only the one line per succeeded job carries.
SUCCEEDED_LINE_FIELD = "$.run_time_ms"


def domains_rule_name(names: ResourceNames, queue: str) -> str:
    """The rule of a declared queue: ``{prefix}-domains-{queue}``."""
    return f"{names.prefix}-domains-{queue}"


def domains_rule_definition(log_group: str) -> dict[str, Any]:
    """A rule that counts succeeded jobs by type and domain in one log group."""
    return {
        "Schema": {"Name": "CloudWatchLogRule", "Version": 1},
        "LogGroupNames": [log_group],
        "LogFormat": "JSON",
        "Contribution": {
            "Keys": list(DOMAIN_RULE_KEYS),
            "Filters": [{"Match": SUCCEEDED_LINE_FIELD, "IsPresent": True}],
        },
        "AggregateOn": "Count",
    }


def domain_rules(declaration: Declaration) -> dict[str, Any]:
    """Per declared queue, its rule (``AWS::CloudWatch::InsightRule``)."""
    return {name: rule for queue in declaration.queues for name, rule in domain_rule(queue).items()}


def domain_rule(queue: str) -> dict[str, Any]:
    """A declared queue's rule (``AWS::CloudWatch::InsightRule``), by its logical ID."""
    body = json.dumps(domains_rule_definition(NAMES.log_group(queue)), separators=(",", ":"))
    return {
        f"{logical_id(queue)}DomainsRule": {
            "Type": "AWS::CloudWatch::InsightRule",
            # The rule names the log group by name: create it after the group
            "DependsOn": QueueIds(queue).log_group,
            "Properties": {
                "RuleName": {"Fn::Sub": domains_rule_name(NAMES, queue)},
                "RuleState": "ENABLED",
                "RuleBody": {"Fn::Sub": body},
            },
        }
    }
