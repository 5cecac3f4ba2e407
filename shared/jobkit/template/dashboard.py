"""The CloudWatch dashboard: per job type, a row of jobs by outcome (and jobs
held back by a limit), throughput, pickup delay, and backlog and dead letters."""

from __future__ import annotations

import json
from typing import Any

from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, JobType
from jobkit.template.naming import NAMES


def dashboard(declaration: Declaration) -> dict[str, Any]:
    """Per job type, a row: jobs by outcome, throughput, pickup delay, DLQ depth (the
    "top-style view" the 2012 job-queue redesign RFC asked for)."""
    widgets: list[dict[str, Any]] = []
    namespace = declaration.namespace
    for row, job_type in enumerate(declaration.types.values()):
        lanes = [lane.key for lane in declaration.queues[job_type.queue].lanes]  # the queue, then its lanes
        y = row * 6
        dimension = ["JobType", job_type.name]
        widgets += [
            _widget(
                0,
                y,
                f"{job_type.name}: jobs",
                "Sum",
                [[namespace, metric, *dimension] for metric in _job_metrics(job_type)],
            ),
            _widget(
                6,
                y,
                f"{job_type.name}: queue {job_type.queue} in and out",
                "Sum",
                [
                    ["AWS/SQS", metric, "QueueName", NAMES.queue(lane)]
                    for lane in lanes
                    for metric in ("NumberOfMessagesSent", "NumberOfMessagesDeleted")
                ],
            ),
            _widget(
                12,
                y,
                f"{job_type.name}: pickup delay (ms)",
                None,
                [
                    [namespace, "PickupDelay", *dimension, {"stat": "p50"}],
                    [namespace, "PickupDelay", *dimension, {"stat": "p95"}],
                ],
            ),
            _widget(
                18,
                y,
                f"{job_type.name}: backlog and dead letters",
                "Maximum",
                [
                    line
                    for queue, dlq in ((NAMES.queue(lane), NAMES.dlq(lane)) for lane in lanes)
                    for line in (
                        ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", queue],
                        ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", queue, {"yAxis": "right"}],
                        ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", dlq],
                    )
                ],
            ),
        ]
    body = json.dumps({"widgets": widgets}, separators=(",", ":"))
    return {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardName": {"Fn::Sub": NAMES.dashboard}, "DashboardBody": {"Fn::Sub": body}},
    }


def _job_metrics(job_type: JobType) -> tuple[str, ...]:
    """The counts of a type's jobs widget: every outcome that ends a job (``Debounced``
    among them), failed attempts, and, for a type with a limit, the holds (``Limited``)."""
    return (*Outcome.final_metrics(), "Failed", *(("Limited",) if job_type.limited else ()))


def _widget(x: int, y: int, title: str, stat: str | None, metrics: list[list[Any]]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "title": title,
        "region": "${AWS::Region}",
        "period": 60,
        "metrics": metrics,
        "view": "timeSeries",
    }
    if stat:
        properties["stat"] = stat
    return {"type": "metric", "x": x, "y": y, "width": 6, "height": 6, "properties": properties}
