"""The template's schedules: per ``[schedules.NAME]``, an EventBridge Scheduler
schedule whose target is the type's SQS queue itself (SendMessage, no function
in between), and a role that may send to that queue only.

The scheduler's SQS target sends the body and nothing else: no message
attributes (so no ``JobType`` attribute; the ops tools read the type from the
body) and no ``MessageGroupId`` on a standard queue (a firing is a tenant of
its own in a fair queue).

A firing the scheduler cannot send (the queue is gone, a permission is
missing) is retried for up to a day, then put in one stack-wide queue,
``{prefix}-schedules-dlq``, with an alarm on its depth: never dropped unseen.
It has a queue of its own because what the scheduler puts there is its own
event (the error and the schedule), not a job the DLQ tools could redrive.
"""

from __future__ import annotations

from typing import Any

from jobkit.core.resources import DLQ_RETENTION_S
from jobkit.declaration.config import Declaration
from jobkit.declaration.schedules import Schedule, input_template
from jobkit.sqs.limits import MAX_MESSAGE_BYTES
from jobkit.template.alarms import schedules_dlq_alarm
from jobkit.template.checkov import checkov_skips
from jobkit.template.naming import NAMES, QueueIds, logical_id


def schedule_ids(schedule: Schedule) -> tuple[str, str]:
    """The logical IDs of a schedule and of its role."""
    base = f"{logical_id(schedule.name)}Schedule"
    return base, f"{base}Role"


#: The stack-wide queue of firings the scheduler could not send, and its alarm.
SCHEDULES_DLQ = "SchedulesDeadLetterQueue"
SCHEDULES_DLQ_ALARM = "SchedulesDeadLetterAlarm"
#: How long and how often the scheduler retries a firing it could not send (its maximums).
RETRY_POLICY = {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}


def schedule_resources(declaration: Declaration) -> dict[str, Any]:
    if not declaration.schedules:
        return {}
    resources: dict[str, Any] = {
        SCHEDULES_DLQ: {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": {"Fn::Sub": NAMES.schedules_dlq},
                "MessageRetentionPeriod": DLQ_RETENTION_S,
                "MaximumMessageSize": MAX_MESSAGE_BYTES,
                "SqsManagedSseEnabled": True,
            },
            "Metadata": checkov_skips("CKV_AWS_27"),
        },
        SCHEDULES_DLQ_ALARM: schedules_dlq_alarm(SCHEDULES_DLQ),
    }
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
                "Description": (
                    f"EventBridge Scheduler: the {schedule.name} schedule sends to its type's queue"
                    " (and the schedules DLQ) only"
                ),
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
                                    "Resource": [
                                        {"Fn::GetAtt": [queue, "Arn"]},
                                        {"Fn::GetAtt": [SCHEDULES_DLQ, "Arn"]},
                                    ],
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
                    "RetryPolicy": RETRY_POLICY,
                    "DeadLetterConfig": {"Arn": {"Fn::GetAtt": [SCHEDULES_DLQ, "Arn"]}},
                },
            },
        }
    return resources
