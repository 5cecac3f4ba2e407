"""The queue summary (``jobkit queues``, MediaWiki's ``showJobs.php --group``).

Counts are per queue, as SQS keeps them: types that share a queue share its
counts, and the summary lists the types of each queue. A queue's priority
lanes are queues of their own, each a row of its own. The oldest message's
age is SQS's CloudWatch metric, which ``jobkit local up`` publishes too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.declaration.config import Declaration
from jobkit.ops.cloudwatch import MetricQuery, fetch_metrics
from jobkit.sqs import QueueDirectory

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

#: How far back to look for the latest ``ApproximateAgeOfOldestMessage`` (SQS publishes it every minute).
AGE_WINDOW_S = 300
_COUNTS: tuple[QueueAttributeNameType, ...] = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


@dataclass(frozen=True)
class QueueCounts:
    """SQS's approximate counts of one queue."""

    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


def queue_counts(sqs: SQSClient, queue_url: str) -> QueueCounts:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(_COUNTS))["Attributes"]
    visible, in_flight, delayed = (int(attributes.get(name, 0)) for name in _COUNTS)
    return QueueCounts(visible, in_flight, delayed)


@dataclass(frozen=True)
class QueueSummary:
    """One queue: its types, its counts, its DLQ depth and its oldest message's age.

    Attributes:
        queued: messages ready to be received.
        in_flight: received and not yet deleted (running, or hidden for a retry backoff).
        delayed: not yet deliverable (DelaySeconds).
        dead_lettered: messages in the DLQ.
        oldest_age_s: from CloudWatch; ``None`` where it has no datapoint.
    """

    queue: str
    sqs_name: str
    types: tuple[str, ...]
    queued: int
    in_flight: int
    delayed: int
    dead_lettered: int
    oldest_age_s: float | None
    priority: str | None = None  # the queue's priority lane this row is (None: the queue's own)

    @property
    def backlog(self) -> int:
        return self.queued + self.in_flight + self.delayed

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "priority": self.priority,
            "sqs_name": self.sqs_name,
            "types": list(self.types),
            "queued": self.queued,
            "in_flight": self.in_flight,
            "delayed": self.delayed,
            "dead_lettered": self.dead_lettered,
            "oldest_age_s": self.oldest_age_s,
        }


@dataclass(frozen=True)
class QueuesReport:
    """Every declared queue; ``metrics_error`` says why ages are missing, if CloudWatch failed."""

    queues: list[QueueSummary]
    metrics_error: str | None

    def to_json(self) -> dict[str, Any]:
        return {"queues": [q.to_json() for q in self.queues], "metrics_error": self.metrics_error}


def queue_summaries(
    sqs: SQSClient, cloudwatch: CloudWatchClient, declaration: Declaration, directory: QueueDirectory, *, now: float
) -> QueuesReport:
    """Counts of every declared queue (and of each of its priority lanes) and
    its DLQ, and the oldest message's age.

    Cost: two GetQueueAttributes per queue or lane, one GetMetricData in all.
    """
    ages = fetch_metrics(
        cloudwatch,
        [
            MetricQuery(key, "AWS/SQS", "ApproximateAgeOfOldestMessage", (("QueueName", name),), "Maximum")
            for key, name in ((key, declaration.queue_name(key)) for key in declaration.lanes)
        ],
        start=now - AGE_WINDOW_S,
        end=now,
        period_s=60,
    )
    summaries = []
    for key, lane in declaration.lanes.items():
        name = declaration.queue_name(key)
        counts = queue_counts(sqs, directory.url(name))
        dead = queue_counts(sqs, directory.url(declaration.dlq_name(key)))
        summaries.append(
            QueueSummary(
                queue=lane.queue,
                sqs_name=name,
                types=declaration.queues[lane.queue].types,
                queued=counts.visible,
                in_flight=counts.in_flight,
                delayed=counts.delayed,
                dead_lettered=dead.total,
                oldest_age_s=ages.latest(key),
                priority=lane.priority,
            )
        )
    return QueuesReport(summaries, ages.error)


def lanes_together(lanes: Sequence[QueueSummary]) -> QueueSummary:
    """A queue's counts over its lanes (the oldest message of any), in its own lane's row."""
    if len(lanes) == 1:
        return lanes[0]
    ages = [lane.oldest_age_s for lane in lanes if lane.oldest_age_s is not None]
    return dataclasses.replace(
        lanes[0],
        queued=sum(lane.queued for lane in lanes),
        in_flight=sum(lane.in_flight for lane in lanes),
        delayed=sum(lane.delayed for lane in lanes),
        dead_lettered=sum(lane.dead_lettered for lane in lanes),
        oldest_age_s=max(ages) if ages else None,
    )
