"""IAM's limits on a policy's size, measured as IAM measures them: a managed
policy's document is at most 6,144 characters, and a role's inline policies
together at most 10,240, whitespace aside. A template whose policy is over
fails at deploy; ``jobkit template`` measures each with its references at
their longest (the longest partition, a Region of 15 characters, a 12-digit
account, the longest prefix) and refuses it first, or writes it smaller."""

from __future__ import annotations

import json
import re
from typing import Any

from jobkit.core.errors import ConfigError
from jobkit.core.resources import LONGEST_PREFIX, PREFIX_PARAMETER, ResourceNames
from jobkit.declaration.config import Declaration
from jobkit.template.naming import QueueIds

MAX_MANAGED_POLICY_CHARS = 6_144
MAX_ROLE_POLICY_CHARS = 10_240
#: What any other reference counts for: the longest ARN IAM names (a Lambda function's, 140 characters).
_LONGEST_ARN = 140

#: Pseudo parameters and the prefix at their longest.
_LONGEST = {
    "AWS::Partition": "aws-us-gov",
    "AWS::Region": "x" * 15,
    "AWS::AccountId": "1" * 12,
    PREFIX_PARAMETER: LONGEST_PREFIX,
}


def policy_chars(declaration: Declaration, document: Any) -> int:
    """Characters of a policy document as IAM counts them (no whitespace), every
    reference resolved at its longest."""
    names = ResourceNames(LONGEST_PREFIX)
    arns = {"JobsTable": f"arn:{_LONGEST['AWS::Partition']}:dynamodb:{'x' * 15}:{'1' * 12}:table/{names.table}"}
    for key in declaration.lanes:
        for logical, name in ((QueueIds(key).queue, names.queue(key)), (QueueIds(key).dlq, names.dlq(key))):
            arns[logical] = f"arn:{_LONGEST['AWS::Partition']}:sqs:{'x' * 15}:{'1' * 12}:{name}"

    def resolved(node: Any) -> Any:
        if isinstance(node, dict) and len(node) == 1:
            [(function, argument)] = node.items()
            if function == "Fn::GetAtt":  # a queue's or the table's ARN, else any ARN at its longest (Lambda's: 140)
                return arns.get(argument[0], "a" * _LONGEST_ARN)
            if function == "Ref":
                return _LONGEST.get(argument, "r" * _LONGEST_ARN)
            if function == "Fn::Sub":
                text = argument if isinstance(argument, str) else argument[0]
                return re.sub(r"\$\{([A-Za-z0-9:.]+)\}", lambda m: _LONGEST.get(m.group(1), "s" * _LONGEST_ARN), text)
        if isinstance(node, dict):
            return {k: resolved(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolved(v) for v in node]
        return node

    return len(re.sub(r"\s", "", json.dumps(resolved(document), separators=(",", ":"))))


def check_policy(declaration: Declaration, key: str, what: str, document: Any, limit: int, remedy: str) -> None:
    """Refuse a policy over IAM's ``limit``, naming it, its size and what to do."""
    size = policy_chars(declaration, document)
    if size > limit:
        raise ConfigError(
            declaration.source,
            key,
            f"{what} would be {size:,} characters (its ARNs at their longest), over IAM's {limit:,}: {remedy}",
        )
