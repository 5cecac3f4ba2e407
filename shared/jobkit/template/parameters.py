"""The template's parameters: the resource name prefix, and the settings of the
alarms and the runners' logs that a deployment may change."""

from __future__ import annotations

from typing import Any

from jobkit.core.resources import PREFIX_PARAMETER, PREFIX_PATTERN, ResourceNames
from jobkit.declaration.config import Declaration

# fmt: off
#: The retention periods CloudWatch Logs accepts (PutRetentionPolicy), in days.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731,
                      1096, 1827, 2192, 2557, 2922, 3288, 3653)
# fmt: on


def parameters(declaration: Declaration) -> dict[str, Any]:
    scheme = ResourceNames(f"{{{PREFIX_PARAMETER}}}")  # the names spelled out with "{Prefix}", to describe them
    queues, table = scheme.queue("{queue}"), scheme.table
    return {
        PREFIX_PARAMETER: {
            "Type": "String",
            "Default": declaration.prefix,
            "AllowedPattern": PREFIX_PATTERN.pattern,
            "Description": f"Resource name prefix, e.g. a stage: queues are {queues}, the table {table}",
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
        **_limit_parameters(declaration),
        "LogRetentionDays": {
            "Type": "Number",
            "Default": 30,
            "AllowedValues": list(LOG_RETENTION_DAYS),
            "Description": "How many days the runners' log groups keep their logs (which carry jobs' error messages)",
        },
    }


#: The parameter of the alarm on a limit that starves a type (:func:`jobkit.template.alarms.limit_alarms`).
LIMITED_ALARM_PARAMETER = "LimitedAlarmPerMinute"


def _limit_parameters(declaration: Declaration) -> dict[str, Any]:
    """Only for a declaration with a limited type: an unused parameter is a lint warning."""
    from jobkit.template.alarms import STARVED_MINUTES, STARVED_THRESHOLD

    if not any(t.limited for t in declaration.types.values()):
        return {}
    return {
        LIMITED_ALARM_PARAMETER: {
            "Type": "Number",
            "Default": STARVED_THRESHOLD,
            "MinValue": 1,
            "Description": f"Alarm when a limited job type had at least this many jobs held back by its limit "
            f"in every minute for {STARVED_MINUTES} minutes",
        }
    }
