"""EMF metrics per JobType, and logs that never carry params above DEBUG."""

from __future__ import annotations

import io
import json
import logging
import time
from collections import defaultdict
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.metrics import EmfMetrics, powertools_document
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.declaration.config import Declaration
from jobkit.local import LocalStack

from conftest import START


def parse(emf: str) -> dict[str, dict[str, list[float]]]:
    """JobType -> metric -> values, checking each document's EMF envelope."""
    metrics: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in emf.splitlines():
        document = json.loads(line)
        [directive] = document["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "jobkit-test"
        assert directive["Dimensions"] == [["JobType"]]
        for metric in directive["Metrics"]:
            values = document[metric["Name"]]
            metrics[document["JobType"]][metric["Name"]].extend(values if isinstance(values, list) else [values])
    return metrics


def test_emf_carries_pickup_delay_and_outcome_counts(test_declaration: Declaration) -> None:
    emf = io.StringIO()
    with LocalStack(test_declaration, clock=VirtualClock(START), emf_stream=emf) as stack:
        stack.queue_group().push([JobSpecification("noop") for _ in range(3)])
        stack.queue_group().push([JobSpecification("dedup", {"k": 1}) for _ in range(2)])
        stack.queue_group().push(JobSpecification("alwaysFails"))
        stack.clock.advance(2.5)
        stack.drain()
    metrics = parse(emf.getvalue())
    assert metrics["noop"]["PickupDelay"] == [2500.0, 2500.0, 2500.0]
    assert sum(metrics["noop"]["Succeeded"]) == 3
    assert sum(metrics["dedup"]["Succeeded"]) == 1 and sum(metrics["dedup"]["Duplicate"]) == 1
    failing = metrics["alwaysFails"]
    assert sum(failing["Failed"]) == 3 and sum(failing["Retried"]) == 2 and sum(failing["DeadLettered"]) == 1
    assert len(failing["RunTime"]) == 3


def test_more_than_100_values_split_into_several_documents() -> None:
    out = io.StringIO()
    metrics = EmfMetrics("jobkit-test", out)
    for n in range(250):
        metrics.record(RecordResult(str(n), "noop", Outcome.SUCCEEDED, pickup_delay_ms=float(n), run_time_ms=1.0))
    metrics.flush()
    documents = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [len(d["PickupDelay"]) for d in documents] == [99, 99, 52]
    assert sum(sum(d.get("Succeeded", [])) for d in documents) == 250
    assert parse(out.getvalue())["noop"]["PickupDelay"] == [float(n) for n in range(250)]


def test_documents_are_what_powertools_writes_batch_after_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner builds a set of metric names' definitions with Powertools once
    and reuses them: every later document is still the one Powertools would
    write for the same values (its service dimension included), but the time."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "jobs")
    out = io.StringIO()
    metrics = EmfMetrics("jobkit-test", out)
    batches = [
        [RecordResult("1", "noop", Outcome.SUCCEEDED, pickup_delay_ms=5.0, run_time_ms=1.0)],
        [
            RecordResult("2", "noop", Outcome.SUCCEEDED, pickup_delay_ms=7.0, run_time_ms=2.0, priority="high"),
            RecordResult("3", "noop", Outcome.RETRIED, run_time_ms=3.0),
            RecordResult("4", "other", Outcome.DUPLICATE),
        ],
        [RecordResult("5", "noop", Outcome.SUCCEEDED, pickup_delay_ms=9.0, run_time_ms=4.0)],
    ]
    for batch in batches:
        for result in batch:
            metrics.record(result)
        metrics.flush()
    documents = [json.loads(line) for line in out.getvalue().splitlines()]
    expected = [
        powertools_document("jobkit-test", "noop", {"Succeeded": 1}, {"PickupDelay": [5.0], "RunTime": [1.0]}),
        powertools_document(
            "jobkit-test",
            "noop",
            {"Succeeded": 1, "Retried": 1, "Failed": 1},
            {"PickupDelay": [7.0], "RunTime": [2.0, 3.0]},
        ),
        powertools_document("jobkit-test", "other", {"Duplicate": 1}, {}),
        powertools_document("jobkit-test", "noop", {}, {"PickupDelay": [7.0]}, {"Priority": "high"}),
        powertools_document("jobkit-test", "noop", {"Succeeded": 1}, {"PickupDelay": [9.0], "RunTime": [4.0]}),
    ]
    for document in [*documents, *expected]:
        assert abs(document["_aws"].pop("Timestamp") / 1000 - time.time()) < 60
    assert documents == expected
    assert [d["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for d in documents[:1]] == [[["JobType", "service"]]]


class BrokenMetrics:
    def record(self, result: RecordResult) -> None:
        raise RuntimeError("the metrics backend is broken")

    def flush(self) -> None:
        raise RuntimeError("the metrics backend is broken")


def test_broken_metrics_never_fail_a_job(stack: LocalStack) -> None:
    for runner in stack.runners.values():
        runner._metrics = BrokenMetrics()
    spec = JobSpecification("noop")
    stack.queue_group().push(spec)
    stack.drain()
    assert stack.queue_depth("noop") == 0
    assert stack.queue_depth("noop", dlq=True) == 0


SECRET = "s3cr3t-param-value"


@pytest.mark.parametrize("job_type", ["noop", "alwaysFails", "dedup", "permanent"])
def test_params_never_reach_logs_above_debug(
    stack: LocalStack, caplog: pytest.LogCaptureFixture, job_type: str
) -> None:
    with caplog.at_level(logging.DEBUG, logger="jobkit"):
        stack.queue_group("enwiki").push(JobSpecification(job_type, {"password": SECRET}))
        stack.drain()
    above_debug = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert above_debug, "the runner should log at INFO and above"
    for record in above_debug:
        assert SECRET not in record.getMessage()
        assert SECRET not in json.dumps(vars(record), default=str)
    # the job's keys are on every runner record about it; params only at DEBUG
    keyed = [r for r in above_debug if getattr(r, "job_id", None)]
    assert keyed and all(r.job_type == job_type and r.domain == "enwiki" for r in keyed)
    debug: list[Any] = [r for r in caplog.records if r.levelno == logging.DEBUG and hasattr(r, "params")]
    assert debug and debug[0].params == {"password": SECRET}
