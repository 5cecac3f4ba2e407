"""``jobkit top``: is every job type keeping up? One snapshot per frame.

Per type, over the last ``window_s`` seconds:

- **in/min**: messages sent to the type's queue (``AWS/SQS NumberOfMessagesSent``:
  pushes, delay hops and deferrals). Per queue, so types that share a queue show
  the same figure.
- **out/min**: jobs that left for good (the EMF counts ``Succeeded``,
  ``DeadLettered``, ``Duplicate``, ``Superseded`` and ``Redelivered``).
- **failed/min**: failed attempts (``Failed``).
- **p50/p95**: pickup delay (``PickupDelay`` percentiles).
- **backlog**, **DLQ**: SQS's counts now (per queue); **oldest**: the age of
  the queue's oldest message (``ApproximateAgeOfOldestMessage``).

A type whose queue has priority lanes gets these summed over its lanes (the
oldest message of any lane), and a line per lane below it: the lane's
backlog, oldest message, dead letters and p95 pickup delay (``PickupDelay``
with the ``Priority`` dimension; the queue's own lane has none of its own).

The worst line is the type to look at first, by what an operator must act
on: the most dead letters, then the longest wait of a job that is due (its
p95 pickup delay, or its queue's oldest message while the queue has jobs
ready to receive: a delayed job, or one running, is not behind), then the
most jobs ready. A type whose only jobs are delayed is not behind at all.

Cost per frame: two GetQueueAttributes per queue (and per lane) and three
GetMetricData requests (CloudWatch bills GetMetricData per metric: 2 per queue
or lane, 8 per type and 1 per priority lane of its queue).

Against ``jobkit local up`` every figure is there too: the local stack
publishes what SQS and its runners measure to its CloudWatch every few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.core.metrics import DIMENSION, PRIORITY_DIMENSION
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration
from jobkit.ops.cloudwatch import MetricQuery, fetch_metrics
from jobkit.ops.queues import QueueSummary, lanes_together, queue_summaries
from jobkit.sqs import QueueDirectory

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sqs import SQSClient

DEFAULT_WINDOW_S = 300
#: The EMF counts of outcomes that end a job, each job once (Poisoned is inside DeadLettered).
FINAL_OUTCOME_METRICS = Outcome.final_metrics()


@dataclass(frozen=True)
class LaneLine:
    """One priority lane of a type's queue, under the type's line."""

    priority: str | None  # None: the queue's own lane
    backlog: int
    dead_lettered: int
    oldest_age_s: float | None
    pickup_p95_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "priority": self.priority,
            "backlog": self.backlog,
            "dead_lettered": self.dead_lettered,
            "oldest_age_s": self.oldest_age_s,
            "pickup_p95_ms": _round(self.pickup_p95_ms),
        }


@dataclass(frozen=True)
class TypeLine:
    """One job type's line. Rates are per minute; ``None`` where CloudWatch had nothing."""

    job_type: str
    queue: str
    shared_queue: bool
    backlog: int
    dead_lettered: int
    oldest_age_s: float | None
    in_per_min: float | None
    out_per_min: float | None
    failed_per_min: float | None
    pickup_p50_ms: float | None
    pickup_p95_ms: float | None
    ready: int | None = None  # messages ready to receive now (None: unknown, taken as the backlog)
    lanes: tuple[LaneLine, ...] = ()  # its queue's lanes, the queue's own first, if it has priority lanes

    @property
    def due(self) -> int:
        return self.backlog if self.ready is None else self.ready

    @property
    def lag_s(self) -> float:
        """How long a due job has waited: its p95 pickup delay, or its queue's
        oldest message while jobs are ready to receive (a delayed or running
        job is not behind), whichever is longer."""
        oldest = (self.oldest_age_s or 0.0) if self.due > 0 else 0.0
        return max(oldest, (self.pickup_p95_ms or 0.0) / 1000)

    @property
    def urgency(self) -> tuple[int, float, int]:
        """What an operator must act on, most first: dead letters, then how
        long a due job has waited, then how many are due."""
        return (self.dead_lettered, self.lag_s, self.due)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.job_type,
            "queue": self.queue,
            "shared_queue": self.shared_queue,
            "backlog": self.backlog,
            "dead_lettered": self.dead_lettered,
            "oldest_age_s": self.oldest_age_s,
            "in_per_min": _round(self.in_per_min),
            "out_per_min": _round(self.out_per_min),
            "failed_per_min": _round(self.failed_per_min),
            "pickup_p50_ms": _round(self.pickup_p50_ms),
            "pickup_p95_ms": _round(self.pickup_p95_ms),
            "ready": self.ready,
            "lanes": [lane.to_json() for lane in self.lanes],
        }


@dataclass(frozen=True)
class TopSnapshot:
    """One frame of ``jobkit top``; ``notes`` say which metrics are missing and why."""

    at: float
    window_s: int
    lines: list[TypeLine]
    notes: list[str]

    @property
    def worst(self) -> str | None:
        """The type to look at first (:attr:`TypeLine.urgency`), or ``None``
        when no type has a dead letter or a job that is due."""
        if not self.lines:
            return None
        worst = max(self.lines, key=lambda line: line.urgency)
        return worst.job_type if worst.urgency > (0, 0.0, 0) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "window_s": self.window_s,
            "worst": self.worst,
            "types": [line.to_json() for line in self.lines],
            "notes": self.notes,
        }


def top_snapshot(
    sqs: SQSClient,
    cloudwatch: CloudWatchClient,
    declaration: Declaration,
    directory: QueueDirectory,
    *,
    now: float,
    window_s: int = DEFAULT_WINDOW_S,
) -> TopSnapshot:
    """Take one frame: SQS counts now, and CloudWatch figures over the last ``window_s`` seconds."""
    if window_s < 60 or window_s % 60:
        raise ValueError(f"the window must be a whole number of minutes, got {window_s} s")
    report = queue_summaries(sqs, cloudwatch, declaration, directory, now=now)
    queues: dict[str, list[QueueSummary]] = {}
    for summary in report.queues:  # a queue's own lane first, then its priority lanes
        queues.setdefault(summary.queue, []).append(summary)
    start = now - window_s
    counts = fetch_metrics(cloudwatch, _count_queries(declaration), start=start, end=now, period_s=window_s)
    # Percentiles in a request of their own: where they fail (plain moto
    # cannot compute them), the counts still show.
    delays = fetch_metrics(cloudwatch, _delay_queries(declaration), start=start, end=now, period_s=window_s)
    minutes = window_s / 60
    lines = []
    for name, job_type in sorted(declaration.types.items()):
        lanes = queues[job_type.queue]
        out = [counts.total((name, metric)) for metric in FINAL_OUTCOME_METRICS]
        known = [value for value in out if value is not None]
        sent = [value for lane in lanes if (value := counts.total(("in", lane.sqs_name))) is not None]
        total = lanes_together(lanes)
        lines.append(
            TypeLine(
                job_type=name,
                queue=job_type.queue,
                shared_queue=len(lanes[0].types) > 1,
                backlog=total.backlog,
                dead_lettered=total.dead_lettered,
                oldest_age_s=total.oldest_age_s,
                in_per_min=_per(sum(sent) if sent else None, minutes),
                out_per_min=_per(sum(known) if known else None, minutes),
                failed_per_min=_per(counts.total((name, "Failed")), minutes),
                pickup_p50_ms=delays.latest((name, "p50")),
                pickup_p95_ms=delays.latest((name, "p95")),
                ready=total.queued,
                lanes=tuple(
                    LaneLine(
                        lane.priority,
                        lane.backlog,
                        lane.dead_lettered,
                        lane.oldest_age_s,
                        None if lane.priority is None else delays.latest((name, lane.priority, "p95")),
                    )
                    for lane in lanes
                )
                if len(lanes) > 1
                else (),
            )
        )
    failures = (("ages", report.metrics_error), ("rates", counts.error), ("pickup delays", delays.error))
    notes = [f"{what} unavailable: {error}" for what, error in failures if error]
    if not notes and counts.empty and delays.empty:
        notes.append(f"CloudWatch has no jobkit or SQS metrics for the last {window_s // 60} min")
    return TopSnapshot(now, window_s, lines, notes)


def _count_queries(declaration: Declaration) -> list[MetricQuery]:
    queries = [
        MetricQuery(("in", name), "AWS/SQS", "NumberOfMessagesSent", (("QueueName", name),), "Sum")
        for name in map(declaration.queue_name, declaration.lanes)
    ]
    for name in declaration.types:
        for metric in (*FINAL_OUTCOME_METRICS, "Failed"):
            queries.append(MetricQuery((name, metric), declaration.namespace, metric, ((DIMENSION, name),), "Sum"))
    return queries


def _delay_queries(declaration: Declaration) -> list[MetricQuery]:
    queries = [
        MetricQuery((name, stat), declaration.namespace, "PickupDelay", ((DIMENSION, name),), stat)
        for name in declaration.types
        for stat in ("p50", "p95")
    ]
    for name, job_type in declaration.types.items():
        for lane in declaration.queues[job_type.queue].lanes[1:]:
            dimensions = ((DIMENSION, name), (PRIORITY_DIMENSION, str(lane.priority)))
            key = (name, lane.priority, "p95")
            queries.append(MetricQuery(key, declaration.namespace, "PickupDelay", dimensions, "p95"))
    return queries


def _per(total: float | None, minutes: float) -> float | None:
    return None if total is None else total / minutes


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
