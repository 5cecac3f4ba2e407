"""Dollars per million jobs, from measured request counts and durations, at AWS
list prices; and the idle cost of a queue.

PRICES are AWS's published on-demand list prices for us-east-1 as of 2025
(DynamoDB on-demand after its November 2024 reduction). Check them against the
pricing pages before you budget; they are inputs here, not measurements.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any

from _common import ROOT, aws_environment, environment

PRICES = {
    "as_of": "2025 list prices, us-east-1",
    "sqs_per_million_requests": 0.40,  # standard queue, each 64 KiB chunk of a request
    "lambda_per_million_requests": 0.20,
    "lambda_arm64_per_gb_second": 0.0000133334,
    "dynamodb_per_million_write_units": 0.625,  # on-demand; a failed conditional write uses one too
    "dynamodb_per_million_read_units": 0.125,
    "logs_per_gb_ingested": 0.50,
    "custom_metric_per_month": 0.30,
}
MEMORY_GB = 0.25  # the declaration's default memory_mb = 256
BATCH = 10  # full batches
DYNAMODB_LATENCY_MS = 5.0  # a conditional write's round trip in-region (a typical figure, not measured here)
IDLE_POLLERS = 5  # Lambda's SQS event source polls with several long-polling connections when idle
LONG_POLL_S = 20


def log_output_per_job(jobs: int = 100) -> dict[str, float]:
    """What a successful plain job writes to CloudWatch Logs, measured by running
    the real Lambda handler: bytes of JSON log (Powertools, INFO) and EMF, and
    INFO lines, per job."""
    from moto import mock_aws

    from jobkit import JobSpecification
    from jobkit.declaration.config import declaration_to_dict, load_declaration
    from jobkit.local.provision import provision_queues, provision_table
    from jobkit.testing import FakeLambdaContext, sqs_event

    sys.path.insert(0, str(ROOT / "functions" / "runner"))
    declaration = load_declaration(ROOT / "infra" / "jobs.toml")
    env = {
        "JOBKIT_DECLARATION": json.dumps(declaration_to_dict(declaration)),
        "JOBKIT_QUEUE_URLS": "{}",
        "JOBKIT_QUEUE": "refreshLinks",
    }
    with aws_environment(None), mock_aws(), environment(env):
        import boto3

        provision_queues(boto3.client("sqs"), declaration)
        provision_table(boto3.client("dynamodb"), declaration)
        import importlib

        app = importlib.import_module("jobkit.handler")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for start in range(0, jobs, BATCH):
                specs = [JobSpecification("refreshLinks", {"title": f"Page {n}"}) for n in range(start, start + BATCH)]
                response = app.handler(sqs_event(specs), FakeLambdaContext())
                assert not response["batchItemFailures"], response  # the figure is of successful jobs
    text = out.getvalue()
    info = [line for line in text.splitlines() if line.startswith('{"level":"INFO"')]
    return {"bytes": len(text.encode("utf-8")) / jobs, "info_lines": len(info) / jobs}


def per_million(kind: dict[str, float], log_bytes: float, round_trips_per_job: float) -> dict[str, float]:
    """$ per million jobs of one kind. ``kind`` has dynamodb_requests_per_job and
    cpu_us_per_job; the billed wait on DynamoDB is the round trips a batch waits
    through (its requests overlap), shared by its jobs."""
    p = PRICES
    sqs_requests = 3 / BATCH  # SendMessageBatch, the mapping's ReceiveMessage, DeleteMessageBatch
    duration_s = kind["cpu_us_per_job"] / 1e6 + round_trips_per_job * DYNAMODB_LATENCY_MS / 1000
    costs = {
        "sqs": sqs_requests * p["sqs_per_million_requests"],
        "lambda_requests": p["lambda_per_million_requests"] / BATCH,
        "lambda_compute": duration_s * MEMORY_GB * p["lambda_arm64_per_gb_second"] * 1e6,
        "dynamodb": kind["dynamodb_requests_per_job"] * p["dynamodb_per_million_write_units"],
        "logs": log_bytes * 1e6 / 1e9 * p["logs_per_gb_ingested"],
    }
    costs["total"] = sum(costs.values())
    return {k: round(v, 4) for k, v in costs.items()}


def idle_cost_per_queue_month() -> dict[str, float]:
    requests = IDLE_POLLERS * (30 * 24 * 3600 / LONG_POLL_S)
    return {
        "pollers": IDLE_POLLERS,
        "receive_requests_per_month": requests,
        "dollars_per_month": round(requests / 1e6 * PRICES["sqs_per_million_requests"], 2),
    }


def run(runner_figures: dict[str, Any], round_trips: dict[str, Any]) -> dict[str, Any]:
    import logging

    logging.disable(logging.NOTSET)
    logs = log_output_per_job()
    log_bytes = logs["bytes"]
    trips = round_trips["kinds"]
    kinds = {
        # a kind without a round-trip figure (a leaf: a rare root check) waits through each request
        name: per_million(
            figures,
            log_bytes,
            trips[name]["round_trips_per_batch"] / BATCH if name in trips else figures["dynamodb_requests_per_job"],
        )
        for name, figures in runner_figures["jobkit"].items()
    }
    return {
        "prices": PRICES,
        "assumptions": {
            "memory_gb": MEMORY_GB,
            "batch": BATCH,
            "dynamodb_latency_ms": DYNAMODB_LATENCY_MS,
            "log_bytes_per_job": round(log_bytes),
            "info_lines_per_job": logs["info_lines"],
        },
        "dollars_per_million_jobs": kinds,
        "idle_queue": idle_cost_per_queue_month(),
    }
