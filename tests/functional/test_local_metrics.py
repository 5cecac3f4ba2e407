"""The local stack puts what SQS and its runners measure into its CloudWatch,
and ``jobkit top`` and ``jobkit queues`` read it with their AWS queries.

Where moto's CloudWatch differs from AWS's (see :mod:`jobkit.local.moto_patches`):
it computes percentiles only with the local stack's help (nearest-rank, where
AWS approximates), cuts periods from StartTime to the second (AWS rounds a
recent StartTime down to the minute), and matches a query with dimensions in
any namespace. These tests put datapoints well inside their windows, so that
none of this changes their figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration
from jobkit.local import LocalStack
from jobkit.local.results import PUBLISH_INTERVAL_S, RETENTION_S, MetricsPublisher
from jobkit.ops.queues import queue_summaries
from jobkit.ops.top import TopSnapshot, TypeLine, top_snapshot
from jobkit.sqs import QueueDirectory

from conftest import START
from faults import FailCalls


@pytest.fixture
def stack(test_declaration: Declaration) -> Iterator[LocalStack]:
    with LocalStack(test_declaration, clock=VirtualClock(START), seed=1, publish_metrics=True) as local:
        yield local


def publisher(stack: LocalStack) -> MetricsPublisher:
    assert stack.metrics_publisher is not None
    return stack.metrics_publisher


def next_publication(stack: LocalStack) -> None:
    """Let the publication interval pass, and one polling round publish."""
    assert isinstance(stack.clock, VirtualClock)
    stack.clock.advance(PUBLISH_INTERVAL_S)
    stack.poll_once()


def top(stack: LocalStack) -> dict[str, TypeLine]:
    return {line.job_type: line for line in frame(stack).lines}


def frame(stack: LocalStack) -> TopSnapshot:
    directory = QueueDirectory(stack.sqs, stack.declaration, stack.queue_urls)
    return top_snapshot(stack.sqs, stack.client("cloudwatch"), stack.declaration, directory, now=stack.clock.now())


def oldest_ages(stack: LocalStack) -> dict[str, float | None]:
    directory = QueueDirectory(stack.sqs, stack.declaration, stack.queue_urls)
    report = queue_summaries(stack.sqs, stack.client("cloudwatch"), stack.declaration, directory, now=stack.clock.now())
    assert report.metrics_error is None
    return {q.queue: q.oldest_age_s for q in report.queues}


def test_top_shows_the_rates_and_pickup_delays_the_runners_measured(stack: LocalStack) -> None:
    # Given 10 noop jobs pushed a second apart, run together 1 s after the
    # last (pickup delays of 1 to 10 s), and 2 flaky jobs that each fail once
    assert isinstance(stack.clock, VirtualClock)
    group = stack.queue_group()
    for n in range(10):
        group.push(JobSpecification("noop", {"n": n}))
        stack.clock.advance(1)
    group.push([JobSpecification("flaky", {"fail_times": 1, "n": n}) for n in range(2)])
    stack.drain()
    assert stack.results.outcomes("flaky") == {Outcome.RETRIED: 2, Outcome.SUCCEEDED: 2}
    # When the next publication is due, and an operator looks at the last 5 minutes
    next_publication(stack)
    lines = top(stack)
    # Then every figure is per minute, from CloudWatch
    noop, flaky = lines["noop"], lines["flaky"]
    assert (noop.in_per_min, noop.out_per_min, noop.failed_per_min) == (2.0, 2.0, None)
    assert (flaky.in_per_min, flaky.out_per_min, flaky.failed_per_min) == (0.4, 0.4, 0.4)
    # and the pickup percentiles are those of the delays measured (nearest rank)
    assert noop.pickup_p50_ms == pytest.approx(5_000) and noop.pickup_p95_ms == pytest.approx(10_000)
    assert flaky.pickup_p95_ms is not None and flaky.pickup_p95_ms > 1_000  # the retry waited its backoff
    # and types that did nothing show nothing
    assert lines["dedup"].in_per_min is None and lines["dedup"].pickup_p50_ms is None
    assert frame(stack).notes == []


def test_queues_shows_the_oldest_message_age_and_forgets_it_once_the_queue_drains(stack: LocalStack) -> None:
    assert isinstance(stack.clock, VirtualClock)
    # Given three noop jobs that wait 90 s unrun
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(3)])
    stack.clock.advance(90)
    publisher(stack).publish()
    stack.clock.advance(1)
    # Then the queue's oldest message is 90 s old; a queue that never had one has no age
    ages = oldest_ages(stack)
    assert ages["noop"] == 90.0 and ages["flaky"] is None
    assert top(stack)["noop"].in_per_min == pytest.approx(3 / 5)
    # When they run, and a minute passes
    stack.drain()
    next_publication(stack)
    stack.clock.advance(60)
    publisher(stack).publish()
    stack.clock.advance(1)
    # Then the age is 0 again (the latest minute's maximum), not the last one seen
    assert oldest_ages(stack)["noop"] == 0.0


def test_publishing_is_batched_not_per_job(stack: LocalStack) -> None:
    # Given 200 jobs in 20 batches, run within one publication interval
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(200)])
    stack.drain()
    assert publisher(stack).requests == 0
    # When the interval has passed
    next_publication(stack)
    # Then one PutMetricData per namespace (the runners', SQS's) sent them all
    assert publisher(stack).requests == 2
    datapoints = stack.client("cloudwatch").get_metric_data(
        MetricDataQueries=[
            {
                "Id": "count",
                "MetricStat": {
                    "Metric": {
                        "Namespace": stack.declaration.namespace,
                        "MetricName": "PickupDelay",
                        "Dimensions": [{"Name": "JobType", "Value": "noop"}],
                    },
                    "Period": 60,
                    "Stat": "SampleCount",
                },
            }
        ],
        StartTime=datetime.fromtimestamp(START - 60, UTC),
        EndTime=datetime.fromtimestamp(stack.clock.now() + 1, UTC),
    )
    assert datapoints["MetricDataResults"][0]["Values"] == [200.0]


def test_a_failed_publication_loses_its_metrics_and_nothing_else(stack: LocalStack) -> None:
    # Given a CloudWatch that refuses PutMetricData
    outage = FailCalls(stack.client("cloudwatch"), "cloudwatch.PutMetricData", times=2)
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(5)])
    stack.drain()
    # When a publication fails
    next_publication(stack)
    # Then the jobs ran, and the views show no figures rather than fail
    assert stack.results.outcomes("noop") == {Outcome.SUCCEEDED: 5}
    assert publisher(stack).errors == 2 and outage.remaining == 0
    assert top(stack)["noop"].out_per_min is None
    # And the next publication goes through
    stack.queue_group().push(JobSpecification("noop"))
    stack.drain()
    next_publication(stack)
    assert top(stack)["noop"].out_per_min == pytest.approx(1 / 5)


def test_old_datapoints_are_dropped_after_the_retention(stack: LocalStack) -> None:
    assert isinstance(stack.clock, VirtualClock)
    stack.queue_group().push(JobSpecification("noop"))
    stack.drain()
    next_publication(stack)
    published_at = stack.clock.now()
    cloudwatch = stack.client("cloudwatch")

    def succeeded_then() -> list[float]:
        response = cloudwatch.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": "succeeded",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": stack.declaration.namespace,
                            "MetricName": "Succeeded",
                            "Dimensions": [{"Name": "JobType", "Value": "noop"}],
                        },
                        "Period": 60,
                        "Stat": "Sum",
                    },
                }
            ],
            StartTime=datetime.fromtimestamp(published_at - 30, UTC),
            EndTime=datetime.fromtimestamp(published_at + 30, UTC),
        )
        return [float(v) for v in response["MetricDataResults"][0]["Values"]]

    assert succeeded_then() == [1.0]
    stack.clock.advance(RETENTION_S - 60)
    publisher(stack).publish()
    assert succeeded_then() == [1.0]  # top's longest window still sees it
    stack.clock.advance(120)
    publisher(stack).publish()
    assert succeeded_then() == []
