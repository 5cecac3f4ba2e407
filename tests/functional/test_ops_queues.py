"""``jobkit queues``, ``jobkit top`` and ``jobkit push`` on the local stack.

moto's CloudWatch publishes no SQS metrics and receives no EMF, so on a
local stack without ``publish_metrics`` every CloudWatch figure is missing
("-", null). Where a test here needs figures, it puts them there as AWS would:
SQS's own metric with PutMetricData, and the runners' EMF documents converted
to PutMetricData, as CloudWatch Logs does. (The local stack's own publishing
is tested in test_local_metrics.py.)
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from ops_cli import Cli, cli_for

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration
from jobkit.local import LocalStack

from conftest import START


def queues_cli(stack: LocalStack) -> Cli:
    return cli_for(stack, columns=220, advance=False)


@pytest.fixture
def jobkit(stack: LocalStack) -> Cli:
    return queues_cli(stack)


def as_json(jobkit: Cli, *args: str) -> Any:
    return json.loads(jobkit(*args, "--json").stdout)


def test_queue_counts_match_what_was_pushed(stack: LocalStack, jobkit: Cli) -> None:
    # Given three ready noop jobs and two delayed ones, one of the ready ones
    # received by a runner that is still at work, and a dead rare job
    group = stack.queue_group()
    group.push([JobSpecification("noop", {"n": n}) for n in range(3)])
    group.push([JobSpecification("noop", {"n": n}, delay=60) for n in range(2)])
    group.push(JobSpecification("rare"))
    stack.drain(until=stack.clock.now() + 30)  # rare fails twice; the delayed noops wait
    assert stack.queue_depth("noop") == 2  # the ready ones ran
    group.push([JobSpecification("noop", {"n": n}) for n in range(3)])
    stack.sqs.receive_message(QueueUrl=stack.queue_urls["test-noop"], VisibilityTimeout=300)
    # When an operator asks
    report = as_json(jobkit, "queues")
    queues = {q["queue"]: q for q in report["queues"]}
    # Then the counts are SQS's, per queue, with the types that share it
    assert set(queues) == set(stack.declaration.queues)
    assert {k: queues["noop"][k] for k in ("queued", "in_flight", "delayed", "dead_lettered")} == {
        "queued": 2,
        "in_flight": 1,
        "delayed": 2,
        "dead_lettered": 0,
    }
    assert queues["lowTraffic"]["types"] == ["rare", "rarer", "slow"] and queues["lowTraffic"]["dead_lettered"] == 1
    assert queues["noop"]["sqs_name"] == "test-noop"
    # moto's CloudWatch has no SQS metrics: the oldest message's age is unknown
    assert queues["noop"]["oldest_age_s"] is None and report["metrics_error"] is None
    table = jobkit("queues").stdout
    assert "test-lowTraffic" in table and "rare, rarer" in table


def publish_oldest_age(stack: LocalStack, queue: str, age_s: float) -> None:
    """The datapoint SQS publishes every minute: the age of the queue's oldest message."""
    stack.client("cloudwatch").put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": queue}],
                "Timestamp": datetime.fromtimestamp(stack.clock.now() - 60, UTC),
                "Value": age_s,
                "Unit": "Seconds",
            }
        ],
    )


def test_the_oldest_message_age_comes_from_cloudwatch(stack: LocalStack, jobkit: Cli) -> None:
    # Given the datapoint SQS publishes every minute
    publish_oldest_age(stack, "test-noop", 754.0)
    queues = {q["queue"]: q for q in as_json(jobkit, "queues")["queues"]}
    assert queues["noop"]["oldest_age_s"] == 754.0 and queues["flaky"]["oldest_age_s"] is None
    assert "12m34s" in jobkit("queues").stdout


def test_top_renders_one_frame_with_the_worst_line_and_missing_metrics_as_dashes(
    stack: LocalStack, jobkit: Cli
) -> None:
    stack.queue_group().push([JobSpecification("flaky", {"fail_times": 0, "n": n}) for n in range(4)])
    stack.queue_group().push(JobSpecification("noop"))
    frame = as_json(jobkit, "top", "--once")
    lines = {line["type"]: line for line in frame["types"]}
    assert set(lines) == set(stack.declaration.types)
    assert (lines["flaky"]["backlog"], lines["noop"]["backlog"], lines["dedup"]["backlog"]) == (4, 1, 0)
    assert frame["worst"] == "flaky"  # no lag known: the largest backlog
    assert lines["rare"]["shared_queue"] and not lines["noop"]["shared_queue"]
    assert lines["flaky"]["pickup_p95_ms"] is None and lines["flaky"]["out_per_min"] is None
    assert frame["notes"] == ["CloudWatch has no jobkit or SQS metrics for the last 5 min"]
    text = jobkit("top", "--once").stdout
    flaky_row = next(row for row in text.splitlines() if row.startswith("│ flaky "))
    assert flaky_row.split("│")[3].strip() == "4"  # backlog
    assert [cell.strip() for cell in flaky_row.split("│")[4:10]] == ["-"] * 6
    assert "lowTraffic (shared)" in text and "CloudWatch has no jobkit or SQS metrics" in text


def ingest_emf(cloudwatch: Any, stream: io.StringIO, at: float) -> int:
    """Put the metrics of EMF documents into CloudWatch, as CloudWatch Logs
    extracts them: a list of values as raw values. The time is the stack's
    clock (Powertools stamps documents with the real one)."""
    data = []
    for line in stream.getvalue().splitlines():
        document = json.loads(line)
        [directive] = document["_aws"]["CloudWatchMetrics"]
        dimensions = [{"Name": name, "Value": document[name]} for name in directive["Dimensions"][0]]
        for metric in directive["Metrics"]:
            value = document[metric["Name"]]
            data.append(
                {
                    "MetricName": metric["Name"],
                    "Dimensions": dimensions,
                    "Values": [float(v) for v in (value if isinstance(value, list) else [value])],
                    "Timestamp": datetime.fromtimestamp(at, UTC),
                    "Unit": metric["Unit"],
                }
            )
    for start in range(0, len(data), 20):
        cloudwatch.put_metric_data(Namespace=directive_namespace(stream), MetricData=data[start : start + 20])
    return len(data)


def directive_namespace(stream: io.StringIO) -> str:
    first = json.loads(stream.getvalue().splitlines()[0])
    return str(first["_aws"]["CloudWatchMetrics"][0]["Namespace"])


@pytest.fixture
def emf_stack(test_declaration: Declaration) -> Iterator[tuple[LocalStack, io.StringIO]]:
    stream = io.StringIO()
    with LocalStack(test_declaration, clock=VirtualClock(START), seed=1, emf_stream=stream) as local:
        yield local, stream


def test_top_shows_rates_from_the_runners_metrics(emf_stack: tuple[LocalStack, io.StringIO]) -> None:
    # Given 10 noop jobs and 2 flaky ones that each fail once, run, and their
    # EMF metrics in CloudWatch
    stack, stream = emf_stack
    stack.queue_group().push([JobSpecification("noop", {"n": n}) for n in range(10)])
    stack.queue_group().push([JobSpecification("flaky", {"fail_times": 1, "n": n}) for n in range(2)])
    stack.drain()
    assert stack.results.outcomes("flaky")[Outcome.SUCCEEDED] == 2
    assert ingest_emf(stack.client("cloudwatch"), stream, stack.clock.now() - 30) > 0
    # When top looks at the last 5 minutes
    frame = json.loads(queues_cli(stack)("top", "--once", "--json").stdout)
    lines = {line["type"]: line for line in frame["types"]}
    # Then jobs out and failed attempts are per minute
    assert lines["noop"]["out_per_min"] == 2.0 and lines["noop"]["failed_per_min"] is None
    assert lines["flaky"]["out_per_min"] == 0.4 and lines["flaky"]["failed_per_min"] == 0.4
    assert lines["dedup"]["out_per_min"] is None
    # and the pickup percentiles come from the timings: the noops ran where
    # they were pushed on the frozen clock; the flaky retries waited a backoff
    assert lines["noop"]["pickup_p50_ms"] == 0.0 and lines["noop"]["pickup_p95_ms"] == 0.0
    assert lines["flaky"]["pickup_p50_ms"] == 0.0 and lines["flaky"]["pickup_p95_ms"] >= 1_000
    assert lines["dedup"]["pickup_p95_ms"] is None


def test_push_enqueues_a_job_by_hand(stack: LocalStack, jobkit: Cli) -> None:
    pushed = as_json(jobkit, "push", "noop", "--params", '{"title": "Main Page"}', "--domain", "enwiki")
    assert stack.queue_depth("noop") == 1
    stack.drain()
    [run] = stack.results.attempts(pushed["job_id"])
    assert (run.outcome, run.domain, run.job_type) == (Outcome.SUCCEEDED, "enwiki", "noop")
    delayed = jobkit("push", "noop", "--delay", "120").stdout
    assert delayed.startswith("pushed noop ")
    assert as_json(jobkit, "queues")["queues"][[*stack.declaration.queues].index("noop")]["delayed"] == 1


def test_bad_input_is_a_clear_error(stack: LocalStack, jobkit: Cli) -> None:
    for args, message in [
        (["push", "nope"], "unknown job type 'nope'"),
        (["push", "noop", "--params", "[1, 2]"], "--params must be a JSON object, got list"),
        (["push", "noop", "--params", "{oops"], "--params must be a JSON object"),
        (["push", "noop", "--delay", "-1"], "--delay"),
        (["top", "--once", "--window", "0"], "--window"),
    ]:
        result = jobkit(*args, ok=False)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
    assert stack.queue_depth("noop") == 0


def test_top_points_at_dead_letters_before_a_job_that_is_only_delayed(stack: LocalStack, jobkit: Cli) -> None:
    # Given a noop job waiting out a two-hour delay, whose message SQS counts
    # as 14 minutes old (its age runs from its last hop), and nothing else
    group = stack.queue_group()
    group.push(JobSpecification("noop", delay=7200))
    publish_oldest_age(stack, "test-noop", 840.0)
    # Then no type is behind: a job that is not due is not late
    frame = as_json(jobkit, "top", "--once")
    noop = next(line for line in frame["types"] if line["type"] == "noop")
    assert (noop["backlog"], noop["ready"], noop["oldest_age_s"]) == (1, 0, 840.0)
    assert frame["worst"] is None
    # When a job of another type is dead-lettered
    group.push(JobSpecification("permanent"))
    stack.drain(until=stack.clock.now() + 30)
    # Then that type is the one to look at, above the delayed one
    frame = as_json(jobkit, "top", "--once")
    assert frame["worst"] == "permanent"
