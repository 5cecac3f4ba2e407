"""Alarms, and the topic they notify: per declared queue, dead letters and a
backlog that is not kept up with; per job type, a slow pickup; per job type
with a concurrency or rate limit, a limit that starves the type."""

from __future__ import annotations

from typing import Any

from jobkit.declaration.config import Declaration, JobType, QueueConfig
from jobkit.template.checkov import checkov_skips
from jobkit.template.naming import NAMES, QueueIds, logical_id


def conditions() -> dict[str, Any]:
    """The alarms notify the topic only if the stack has an ``AlarmEmail``."""
    return {"HasAlarmEmail": {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}}


def alarm_topic() -> dict[str, Any]:
    # Unencrypted: CloudWatch alarms cannot publish to a topic encrypted with
    # alias/aws/sns, and the topic carries alarm state changes, no job data.
    return {
        "Type": "AWS::SNS::Topic",
        "Condition": "HasAlarmEmail",
        "Properties": {
            "TopicName": {"Fn::Sub": NAMES.alarm_topic},
            "Subscription": [{"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}}],
        },
        "Metadata": checkov_skips("CKV_AWS_26"),
    }


def queue_alarms(queue: QueueConfig) -> dict[str, Any]:
    ids = QueueIds(queue.name)
    alarms: dict[str, Any] = {}
    for lane in queue.lanes:  # each priority lane is a queue and a DLQ of its own
        lane_ids = QueueIds(lane.key)
        what = f"queue {queue.name}" if lane.priority is None else f"lane {lane.priority} of queue {queue.name}"
        alarms[lane_ids.dead_letters_alarm] = _alarm(
            f"jobs of {what} are in its DLQ",
            namespace="AWS/SQS",
            metric="ApproximateNumberOfMessagesVisible",
            dimensions=[{"Name": "QueueName", "Value": {"Fn::GetAtt": [lane_ids.dlq, "QueueName"]}}],
            statistic="Maximum",
            threshold=0,
        )
        alarms[lane_ids.oldest_message_alarm] = _alarm(
            f"{what} is not keeping up: its oldest message is too old",
            namespace="AWS/SQS",
            metric="ApproximateAgeOfOldestMessage",
            dimensions=[{"Name": "QueueName", "Value": {"Fn::GetAtt": [lane_ids.queue, "QueueName"]}}],
            statistic="Maximum",
            threshold={"Ref": "OldestMessageAlarmSeconds"},
        )
    return {
        **alarms,
        # The runner's chains are allowed (RecursiveLoop: Allow); a drop means the
        # setting was lost (a stack edited by hand, an account-level change).
        ids.recursion_alarm: _alarm(
            f"Lambda stopped invocations of the runner of queue {queue.name} as a recursive loop: its jobs"
            " reach the DLQ without a reason (see docs/runbook.md)",
            namespace="AWS/Lambda",
            metric="RecursiveInvocationsDropped",
            dimensions=[{"Name": "FunctionName", "Value": {"Ref": ids.runner}}],
            statistic="Sum",
            threshold=0,
        ),
    }


def schedules_dlq_alarm(dlq_id: str) -> dict[str, Any]:
    """EventBridge Scheduler could not send a firing to its queue (it retried for up to a day)."""
    return _alarm(
        "a schedule's firing could not be sent to its queue and is in the schedules DLQ (see docs/runbook.md)",
        namespace="AWS/SQS",
        metric="ApproximateNumberOfMessagesVisible",
        dimensions=[{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}],
        statistic="Maximum",
        threshold=0,
    )


def type_alarms(declaration: Declaration, job_type: str) -> dict[str, Any]:
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


#: Minutes in a row a limited type must have had jobs held back for the alarm to fire.
STARVED_MINUTES = 15
#: The default of the ``LimitedAlarmPerMinute`` parameter: held-back jobs per minute
#: that count as "held back" for that minute. A hold is
#: normal under a limit (a burst waits its turn), so one minute with holds means
#: nothing, and neither does a trickle. 10 a minute, every minute for a quarter
#: of an hour, is a limit the type's demand is steadily above: its jobs take a
#: hold (and its backoff, up to a minute) again and again, and the backlog ages
#: towards ``max_held_s``. A deployment lowers it where demand is small.
STARVED_THRESHOLD = 10


def limit_alarms(declaration: Declaration, job_type: JobType) -> dict[str, Any]:
    """For a type with a concurrency or rate limit: jobs were held back by the
    limit in each of the last 15 minutes (the ``Limited`` metric). Nothing for
    a type without one."""
    if not job_type.limited:
        return {}
    return {
        f"{logical_id(job_type.name)}LimitStarvesAlarm": _alarm(
            f"{job_type.name} jobs have been held back by its concurrency or rate limit in every minute for "
            f"{STARVED_MINUTES} minutes (LimitedAlarmPerMinute or more a minute): raise the limit, or accept "
            "the wait (see docs/runbook.md)",
            namespace=declaration.namespace,
            metric="Limited",
            dimensions=[{"Name": "JobType", "Value": job_type.name}],
            statistic="Sum",
            threshold={"Ref": "LimitedAlarmPerMinute"},
            periods=STARVED_MINUTES,
            datapoints=STARVED_MINUTES,  # 15 of 15: every minute, not most of them
            comparison="GreaterThanOrEqualToThreshold",
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
    comparison: str = "GreaterThanThreshold",
    datapoints: int | None = None,
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
        "ComparisonOperator": comparison,
        "TreatMissingData": "notBreaching",
        "AlarmActions": actions,
        "OKActions": actions,
    }
    if datapoints is not None:
        properties["DatapointsToAlarm"] = datapoints
    if extended_statistic:
        properties["ExtendedStatistic"] = extended_statistic
    else:
        properties["Statistic"] = statistic
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": properties}
