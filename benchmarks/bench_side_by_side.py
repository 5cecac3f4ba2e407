"""Jobs of one batch side by side (a type's ``batch_concurrency``): a batch of 10
jobs that each wait 100 ms on the network, in a container built as Lambda builds
it (``jobkit.handler``, from the function's environment; the INFO line and EMF
metrics on, stdout thrown away), against Powertools' BatchProcessor, which runs
a batch's records one after another, on the same event (one Logger line and one
metric per record).

Each side runs in a fresh interpreter, the sides alternate round by round, and
each batch is timed on its own: Lambda bills an invocation's duration, rounded
up to the millisecond, so the billed figure is the sum of the batches' ceilings.
``jobkit, batch_concurrency = 1`` is the control: the default, one job after
another, as Powertools does.

    python benchmarks/bench_side_by_side.py
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from typing import Any

from _common import runner_environment

BATCH, WAIT_MS = 10, 100

EVENTS = """
import sys, time
from jobkit import JobSpecification
from jobkit.testing import FakeLambdaContext, sqs_event
batches, wait_ms = int(sys.argv[1]), int(sys.argv[2])
events = [sqs_event([JobSpecification("waits", {"n": n, "wait_ms": wait_ms}) for n in range(10)])
          for _ in range(batches + 1)]
def timed(handler):
    handler(events[0], FakeLambdaContext(timeout_s=60))  # the container's first batch builds it
    took = []
    for event in events[1:]:
        began = time.perf_counter()
        assert not handler(event, FakeLambdaContext(timeout_s=60))["batchItemFailures"]
        took.append((time.perf_counter() - began) * 1000)
    sys.stderr.write(" ".join(f"{ms:.3f}" for ms in took))
"""

JOBKIT = (
    EVENTS
    + """
import jobkit.handler
timed(jobkit.handler.handler)
"""
)

POWERTOOLS = (
    EVENTS
    + """
import json
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
logger, metrics = Logger(service="jobs"), Metrics(namespace="jobs")
processor = BatchProcessor(event_type=EventType.SQS)
def record_handler(record):
    job = json.loads(record.body)
    time.sleep(job["params"]["wait_ms"] / 1000)
    logger.info("succeeded", extra={"job_id": job["id"], "job_type": job["type"]})
    metrics.add_metric(name="Succeeded", unit=MetricUnit.Count, value=1)
def handler(event, context):
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    metrics.flush_metrics()
    return response
timed(handler)
"""
)


def _environment(batch_concurrency: int) -> dict[str, str]:
    waits = {"class": "bench_jobs:WaitJob", "batch_concurrency": batch_concurrency}
    return runner_environment({"jobkit": {"prefix": "bench"}, "types": {"waits": waits}}, "waits")


def _batch_ms(code: str, batches: int, wait_ms: int, env: dict[str, str]) -> list[float]:
    done = subprocess.run(
        [sys.executable, "-c", code, str(batches), str(wait_ms)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return [float(ms) for ms in done.stderr.strip().splitlines()[-1].split()]


def _figures(batch_ms: list[float]) -> dict[str, float]:
    median = statistics.median(batch_ms)
    billed = sum(math.ceil(ms) for ms in batch_ms) / len(batch_ms)  # Lambda rounds each invocation up to 1 ms
    return {
        "batch_ms": round(median, 1),
        "jobs_per_s_per_container": round(BATCH / (median / 1000), 1),
        "billed_ms_per_million_jobs": round(billed * 1_000_000 / BATCH),
    }


def run(batches: int = 5, rounds: int = 3, wait_ms: int = WAIT_MS) -> dict[str, Any]:
    sides = {
        "jobkit, batch_concurrency = 10": (JOBKIT, _environment(10)),
        "jobkit, batch_concurrency = 1": (JOBKIT, _environment(1)),
        "Powertools BatchProcessor (sequential)": (POWERTOOLS, _environment(1)),
    }
    measured: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for round_ in range(rounds):
        for name in order[round_ % len(order) :] + order[: round_ % len(order)]:
            code, env = sides[name]
            measured[name] += _batch_ms(code, batches, wait_ms, env)
    results = {name: _figures(ms) for name, ms in measured.items()}
    concurrent, sequential = (
        results["jobkit, batch_concurrency = 10"],
        results["Powertools BatchProcessor (sequential)"],
    )
    return {
        "batch": BATCH,
        "wait_ms": wait_ms,
        "batches": batches * rounds,
        "results": results,
        "throughput_vs_powertools": round(
            concurrent["jobs_per_s_per_container"] / sequential["jobs_per_s_per_container"], 2
        ),
        "billed_vs_powertools": round(
            concurrent["billed_ms_per_million_jobs"] / sequential["billed_ms_per_million_jobs"], 3
        ),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
