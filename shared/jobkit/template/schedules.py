"""The template's schedules: per ``[schedules.NAME]``, an EventBridge Scheduler
schedule whose target is the type's SQS queue itself (SendMessage, no function
in between), and a role that may send to that queue only.

The scheduler's SQS target sends the body and nothing else: no message
attributes (so no ``JobType`` attribute; the ops tools read the type from the
body) and no ``MessageGroupId`` on a standard queue (a firing is a tenant of
its own in a fair queue).
"""

from __future__ import annotations

from typing import Any

from jobkit.config import Declaration
from jobkit.schedules import Schedule, input_template
from jobkit.template.naming import QueueIds, logical_id


def schedule_ids(schedule: Schedule) -> tuple[str, str]:
    """The logical IDs of a schedule and of its role."""
    base = f"{logical_id(schedule.name)}Schedule"
    return base, f"{base}Role"


def schedule_resources(declaration: Declaration) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for schedule in declaration.schedules.values():
        queue = QueueIds(declaration.types[schedule.type].queue).queue
        schedule_id, role_id = schedule_ids(schedule)
        window: dict[str, Any] = (
            {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": schedule.flexible_window_min}
            if schedule.flexible_window_min is not None
            else {"Mode": "OFF"}
        )
        resources[role_id] = {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": f"EventBridge Scheduler: the {schedule.name} schedule sends to its type's queue only",
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "scheduler.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
                        }
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "SendToItsQueue",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Sid": "SendToItsQueue",
                                    "Effect": "Allow",
                                    "Action": "sqs:SendMessage",
                                    "Resource": {"Fn::GetAtt": [queue, "Arn"]},
                                }
                            ],
                        },
                    }
                ],
            },
        }
        resources[schedule_id] = {
            "Type": "AWS::Scheduler::Schedule",
            "Properties": {
                "Name": {"Fn::Sub": f"${{Prefix}}-{schedule.name}"},
                "Description": (
                    f"jobkit: pushes one {schedule.type} job per firing ({schedule.expression}, {schedule.timezone})"
                ),
                "ScheduleExpression": schedule.expression,
                "ScheduleExpressionTimezone": schedule.timezone,
                "FlexibleTimeWindow": window,
                "State": "ENABLED",
                "Target": {
                    "Arn": {"Fn::GetAtt": [queue, "Arn"]},
                    "RoleArn": {"Fn::GetAtt": [role_id, "Arn"]},
                    "Input": input_template(schedule),
                },
            },
        }
    return resources
