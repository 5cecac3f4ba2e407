"""The last hour of each type, for the overview's sparklines.

Two series per type, in buckets of :data:`BUCKET_S`, oldest first: messages
sent to its queue and its priority lanes (``AWS/SQS NumberOfMessagesSent``, per queue, as
``jobkit top``'s in/min) and jobs that ended (the EMF counts of
:data:`jobkit.ops.top.FINAL_OUTCOME_METRICS`, as its out/min). The metrics
are the ones :mod:`jobkit.ops.top` defines; this module only keeps their
timestamps (:func:`jobkit.ops.cloudwatch.metric_series`), which a sparkline
needs and :func:`jobkit.ops.cloudwatch.fetch_metrics` (one figure per window)
drops: a bucket without a datapoint is a gap, not zero moved to the end.

Fail-open, like every metrics read of the ops views: where CloudWatch cannot
be read, there are no sparklines and ``error`` says why. Cost: one
GetMetricData (a metric per queue and lane, and 5 per type) per refresh; the app
refreshes it at most once a minute (:class:`HistoryCache`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobkit.core.metrics import DIMENSION
from jobkit.declaration.config import Declaration
from jobkit.ops.cloudwatch import MetricQuery, metric_series
from jobkit.ops.top import FINAL_OUTCOME_METRICS

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

HOUR_S = 3600
BUCKET_S = 300
BUCKETS = HOUR_S // BUCKET_S
#: How long a history is reused before CloudWatch is asked again.
CACHE_S = 60.0
#: ... and while it has nothing to show.
EMPTY_CACHE_S = 10.0


@dataclass(frozen=True)
class History:
    """Per type, jobs in and out per bucket over the last hour, oldest first
    (``None``: no datapoint in that bucket)."""

    at: float
    ins: dict[str, list[float | None]] = field(default_factory=dict)
    outs: dict[str, list[float | None]] = field(default_factory=dict)
    error: str | None = None


def _queries(declaration: Declaration) -> list[MetricQuery]:
    queries = [  # a queue's lanes under its key: their series add up
        MetricQuery(
            ("in", lane.queue), "AWS/SQS", "NumberOfMessagesSent", (("QueueName", declaration.queue_name(key)),), "Sum"
        )
        for key, lane in declaration.lanes.items()
    ]
    for name in declaration.types:
        for metric in FINAL_OUTCOME_METRICS:
            queries.append(MetricQuery(("out", name), declaration.namespace, metric, ((DIMENSION, name),), "Sum"))
    return queries


def last_hour(cloudwatch: CloudWatchClient, declaration: Declaration, *, now: float) -> History:
    """The last hour per type. Never raises: a failure is ``error``."""
    buckets: dict[Hashable, list[float | None]] = {}
    try:
        for query, stamps, values in metric_series(
            cloudwatch, _queries(declaration), start=now - HOUR_S, end=now, period_s=BUCKET_S
        ):
            series = buckets.setdefault(query.key, [None] * BUCKETS)
            for stamp, value in zip(stamps, values, strict=False):
                # a period is stamped with its start: the newest starts less than a bucket before the end
                index = min(BUCKETS - 1, max(0, BUCKETS - math.ceil((now - stamp.timestamp()) / BUCKET_S)))
                series[index] = (series[index] or 0.0) + value
    except Exception as exc:  # as fetch_metrics: a page without sparklines beats a broken one
        return History(now, error=f"{type(exc).__name__}: {exc}")
    empty: list[float | None] = [None] * BUCKETS
    ins = {name: list(buckets.get(("in", t.queue), empty)) for name, t in declaration.types.items()}
    outs = {name: list(buckets.get(("out", name), empty)) for name in declaration.types}
    return History(now, ins, outs)


class HistoryCache:
    """The latest history, fetched again when it is older than ``max_age_s``
    (``empty_max_age_s`` while it has no datapoint, or failed: a fresh stack's
    first metrics should not wait a minute); one fetch at a time, however many
    pages refresh at once."""

    def __init__(
        self, fetch: Callable[[float], History], *, max_age_s: float = CACHE_S, empty_max_age_s: float = EMPTY_CACHE_S
    ) -> None:
        self._fetch = fetch
        self._max_age_s = max_age_s
        self._empty_max_age_s = empty_max_age_s
        self._latest: History | None = None
        self._lock = threading.Lock()

    def get(self, now: float) -> History:
        with self._lock:
            latest = self._latest
            max_age = self._max_age_s if latest is not None and _has_data(latest) else self._empty_max_age_s
            if latest is None or not 0 <= now - latest.at < max_age:
                self._latest = latest = self._fetch(now)
            return latest


def _has_data(history: History) -> bool:
    return any(v is not None for series in (*history.ins.values(), *history.outs.values()) for v in series)
