"""Reading CloudWatch metrics for the ops views, fail-open.

Metrics are the one thing SQS's API cannot tell: the age of a queue's oldest
message (``AWS/SQS ApproximateAgeOfOldestMessage``), how fast messages arrive,
and jobkit's own EMF metrics (pickup delay percentiles, outcomes per type).
They are optional: where CloudWatch has none (a fresh stack, an idle type),
or cannot be read, a view shows ``-`` and says why, and never fails.

The local stack (``jobkit local up``) puts the same metrics into its emulated
CloudWatch, as SQS and CloudWatch Logs would on AWS
(:class:`jobkit.local.results.MetricsPublisher`), so these queries read it as
they read AWS. moto's CloudWatch differs from AWS's in ways listed in
:mod:`jobkit.local.moto_patches`: percentiles are nearest-rank (AWS's are
approximate), periods are cut from ``StartTime`` to the second (AWS rounds a
recent one down to the minute).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import MetricDataQueryTypeDef

#: GetMetricData takes at most 500 queries per request.
MAX_QUERIES = 500


@dataclass(frozen=True)
class MetricQuery:
    """One metric statistic to fetch, under a key of the caller's choice."""

    key: Hashable
    namespace: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    stat: str  # "Sum", "Maximum", "p95", ...


@dataclass
class MetricValues:
    """Fetched datapoints by query key, newest first; ``error`` says why there are none."""

    values: dict[Hashable, list[float]] = field(default_factory=dict)
    error: str | None = None

    @property
    def empty(self) -> bool:
        """No datapoint at all."""
        return not any(self.values.values())

    def latest(self, key: Hashable) -> float | None:
        points = self.values.get(key)
        return points[0] if points else None

    def total(self, key: Hashable) -> float | None:
        points = self.values.get(key)
        return sum(points) if points else None


def fetch_metrics(
    cloudwatch: CloudWatchClient, queries: Sequence[MetricQuery], *, start: float, end: float, period_s: int
) -> MetricValues:
    """Fetch statistics with GetMetricData (500 queries per request, paginated).

    Never raises: a failure leaves every value missing and sets ``error``.
    """
    result = MetricValues()
    try:
        for query, _, values in metric_series(cloudwatch, queries, start=start, end=end, period_s=period_s):
            result.values.setdefault(query.key, []).extend(values)
    except Exception as exc:
        # Deliberately broad: besides AWS errors (no cloudwatch:GetMetricData
        # permission, throttling), emulators fail in their own ways (moto
        # alone answers a statistic it cannot compute, such as a percentile,
        # with a null that boto3 cannot read). A view without metrics is still
        # useful; a crashed one is not.
        result.values.clear()
        result.error = f"{type(exc).__name__}: {exc}"
    return result


def metric_series(
    cloudwatch: CloudWatchClient, queries: Sequence[MetricQuery], *, start: float, end: float, period_s: int
) -> Iterator[tuple[MetricQuery, list[datetime], list[float]]]:
    """Each query's datapoints, newest first, with their timestamps (GetMetricData,
    500 queries per request, paginated: a query may come more than once). Raises
    what the client raises."""
    for offset in range(0, len(queries), MAX_QUERIES):
        chunk = queries[offset : offset + MAX_QUERIES]
        requests: list[MetricDataQueryTypeDef] = [
            {
                "Id": f"q{n}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": q.namespace,
                        "MetricName": q.metric,
                        "Dimensions": [{"Name": name, "Value": value} for name, value in q.dimensions],
                    },
                    "Period": period_s,
                    "Stat": q.stat,
                },
                "ReturnData": True,
            }
            for n, q in enumerate(chunk)
        ]
        pages = cloudwatch.get_paginator("get_metric_data").paginate(
            MetricDataQueries=requests,
            StartTime=datetime.fromtimestamp(start, UTC),
            EndTime=datetime.fromtimestamp(end, UTC),
            ScanBy="TimestampDescending",
        )
        for response in pages:
            for data in response.get("MetricDataResults", []):
                values = [float(v) for v in data.get("Values", [])]
                yield chunk[int(data["Id"][1:])], list(data.get("Timestamps", [])), values
