"""The sparklines' last hour: read from CloudWatch (moto, on the local stack's
clock) with its timestamps, bucket by bucket; fetched at most once a minute."""

from __future__ import annotations

from datetime import UTC, datetime

from jobkit.core.metrics import DIMENSION
from jobkit.local import LocalStack
from jobkit.ui.history import BUCKETS, History, HistoryCache, last_hour


def test_the_last_hour_is_in_five_minute_buckets_with_gaps_where_nothing_was_measured(stack: LocalStack) -> None:
    declaration, now = stack.declaration, stack.clock.now()
    cloudwatch = stack.client("cloudwatch")

    def put(namespace: str, metric: str, dimension: tuple[str, str], ago_s: float, value: float) -> None:
        cloudwatch.put_metric_data(
            Namespace=namespace,
            MetricData=[
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": dimension[0], "Value": dimension[1]}],
                    "Timestamp": datetime.fromtimestamp(now - ago_s, UTC),
                    "Value": value,
                }
            ],
        )

    put(declaration.namespace, "Succeeded", (DIMENSION, "noop"), 100, 3)
    put(declaration.namespace, "DeadLettered", (DIMENSION, "noop"), 110, 1)
    put(declaration.namespace, "Succeeded", (DIMENSION, "noop"), 3000, 5)
    put("AWS/SQS", "NumberOfMessagesSent", ("QueueName", declaration.queue_name("noop")), 100, 7)
    put(declaration.namespace, "Succeeded", (DIMENSION, "noop"), 7200, 99)  # over an hour ago
    history = last_hour(cloudwatch, declaration, now=now)
    assert history.error is None
    outs = history.outs["noop"]
    assert len(outs) == BUCKETS
    assert outs[-1] == 4  # the newest bucket: every outcome that ends a job, summed
    assert outs[1] == 5 or outs[2] == 5  # 50 minutes ago
    assert sum(v for v in outs if v is not None) == 9 and outs.count(None) == BUCKETS - 2
    assert history.ins["noop"][-1] == 7
    assert history.outs["leaf"] == [None] * BUCKETS


def test_a_failure_to_read_is_no_sparkline_and_says_why(stack: LocalStack) -> None:
    class Broken:
        def get_paginator(self, name: str) -> object:
            raise RuntimeError("no cloudwatch:GetMetricData permission")

    history = last_hour(Broken(), stack.declaration, now=stack.clock.now())  # type: ignore[arg-type]
    assert history.error == "RuntimeError: no cloudwatch:GetMetricData permission" and history.outs == {}


def test_the_history_is_fetched_again_after_a_minute_or_while_it_is_empty() -> None:
    fetched: list[float] = []

    def fetch(now: float, data: bool = True) -> History:
        fetched.append(now)
        return History(now, outs={"t": [1.0] if data else [None]})

    cache = HistoryCache(fetch, max_age_s=60, empty_max_age_s=10)
    for now in (0, 30, 59, 60, 61):
        cache.get(now)
    assert fetched == [0, 60]
    empty = HistoryCache(lambda now: fetch(now, data=False), max_age_s=60, empty_max_age_s=10)
    fetched.clear()
    for now in (0, 5, 10, 15):
        empty.get(now)
    assert fetched == [0, 10]
