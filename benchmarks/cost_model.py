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
import math
import sys
from typing import Any

from _common import ROOT, aws_environment, environment

PRICES = {
    "as_of": "2025 list prices, us-east-1",
    "sqs_per_million_requests": 0.40,  # standard queue; each 64 KiB chunk of a request's payload is one request
    "lambda_per_million_requests": 0.20,
    "lambda_arm64_per_gb_second": 0.0000133334,  # the INIT phase too, since 1 August 2025 (ZIP, managed runtimes)
    "dynamodb_per_million_write_units": 0.625,  # on-demand; a failed conditional write uses one too
    "dynamodb_per_million_read_units": 0.125,
    # Lambda's logs to CloudWatch Logs (vended logs, since 1 May 2025), per GB ingested a month, by tier
    "lambda_logs_per_gb_tiers": [[10_240, 0.50], [20_480, 0.25], [20_480, 0.10], [None, 0.05]],
    "custom_metric_per_month": 0.30,
}
MEMORY_GB = 0.25  # the declaration's default memory_mb = 256
BATCH = 10  # full batches
DYNAMODB_LATENCY_MS = 5.0  # a conditional write's round trip in-region (a typical figure, not measured here)
IDLE_POLLERS = 5  # Lambda's SQS event source polls with several long-polling connections when idle
LONG_POLL_S = 20
SQS_CHUNK = 64 * 1024  # SQS bills each 64 KiB chunk of a payload as one request
MAX_MESSAGE_BYTES = 1024 * 1024  # an SQS message, and a SendMessageBatch, at most
LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024  # a synchronous invocation's event, at most
#: Lambda's own lines per invocation (START, END and REPORT, with an Init Duration on a cold start)
PLATFORM_LOG_BYTES_PER_INVOCATION = 300
#: The share of invocations that start a container: AWS's analysis of production workloads says "under 1%"
COLD_START_SHARE = 0.01
#: Payloads priced: the example app's job as measured, and a job whose params are large
LARGE_PAYLOAD_BYTES = 200 * 1024
#: Jobs that wait on another service, priced sequential and side by side
WAIT_MS = 100


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
    body = JobSpecification("refreshLinks", {"title": "Page 1"}).stamped(0.0).to_message()
    return {
        "bytes": len(text.encode("utf-8")) / jobs,
        "info_lines": len(info) / jobs,
        "payload_bytes": float(len(body.encode("utf-8"))),
    }


def batches(payload_bytes: float, batch: int = BATCH) -> tuple[int, int]:
    """Jobs per producer send (SendMessageBatch holds at most 1 MiB) and per
    invocation (Lambda's 6 MB payload): a batch of ``batch`` at most."""
    size = max(1, int(payload_bytes))
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"a message of {size} bytes: SQS carries at most {MAX_MESSAGE_BYTES}")
    return max(1, min(batch, MAX_MESSAGE_BYTES // size)), max(1, min(batch, LAMBDA_PAYLOAD_BYTES // size))


def sqs_requests_per_job(payload_bytes: float, batch: int = BATCH) -> float:
    """Billed SQS requests per job: the producer's SendMessageBatch and the event
    source mapping's ReceiveMessage carry the bodies (each 64 KiB chunk of a
    request's payload a request), its DeleteMessageBatch carries none."""
    sent, invoked = batches(payload_bytes, batch)
    send = max(1, math.ceil(sent * payload_bytes / SQS_CHUNK)) / sent
    receive = max(1, math.ceil(invoked * payload_bytes / SQS_CHUNK)) / invoked
    return send + receive + 1 / invoked


def logs_dollars_per_gb(gb_per_month: float) -> float:
    """The average price of a month's Lambda logs, through the tiers."""
    left, dollars = gb_per_month, 0.0
    for size, price in PRICES["lambda_logs_per_gb_tiers"]:
        taken = left if size is None else min(left, size)
        dollars, left = dollars + taken * price, left - taken
        if left <= 0:
            break
    return dollars / gb_per_month if gb_per_month else PRICES["lambda_logs_per_gb_tiers"][0][1]


def per_million(
    kind: dict[str, float],
    log_bytes: float,
    round_trips_per_job: float,
    *,
    payload_bytes: float,
    init_ms: float,
    wait_ms_per_job: float = 0.0,
    jobs_per_month: float = 100e6,
) -> dict[str, float]:
    """$ per million jobs of one kind. ``kind`` has dynamodb_requests_per_job and
    cpu_us_per_job; the billed wait on DynamoDB is the round trips a batch waits
    through (its requests overlap), shared by its jobs; ``wait_ms_per_job`` is
    what a job waits on other services, as billed (shared when jobs wait side by
    side). A cold start, in ``COLD_START_SHARE`` of invocations, bills its INIT."""
    p = PRICES
    invoked = batches(payload_bytes)[1]  # jobs per invocation
    duration_s = (
        kind["cpu_us_per_job"] / 1e6
        + round_trips_per_job * DYNAMODB_LATENCY_MS / 1000
        + wait_ms_per_job / 1000
        + COLD_START_SHARE * init_ms / 1000 / invoked
    )
    bytes_per_job = log_bytes + PLATFORM_LOG_BYTES_PER_INVOCATION / invoked
    gb_per_month = bytes_per_job * jobs_per_month / 1024**3
    costs = {
        "sqs": sqs_requests_per_job(payload_bytes) * p["sqs_per_million_requests"],
        "lambda_requests": p["lambda_per_million_requests"] / invoked,
        "lambda_compute": duration_s * MEMORY_GB * p["lambda_arm64_per_gb_second"] * 1e6,
        "dynamodb": kind["dynamodb_requests_per_job"] * p["dynamodb_per_million_write_units"],
        "logs": bytes_per_job * 1e6 / 1024**3 * logs_dollars_per_gb(gb_per_month),
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


def run(
    runner_figures: dict[str, Any],
    round_trips: dict[str, Any],
    coldstart: dict[str, Any] | None = None,
    side_by_side: dict[str, Any] | None = None,
) -> dict[str, Any]:
    import logging

    logging.disable(logging.NOTSET)
    logs = log_output_per_job()
    log_bytes, payload = logs["bytes"], logs["payload_bytes"]
    # the container as shipped: a read-only layer with its bytecode, its DynamoDB client made
    init_ms = (coldstart or {}).get("read_only_shipped_bytecode_ms") or (coldstart or {}).get(
        "handler_with_table_client_ms", 0.0
    )
    trips = round_trips["kinds"]
    jobkit = runner_figures["jobkit"]

    def priced(figures: dict[str, float], trips_per_job: float, **how: float) -> dict[str, float]:
        return per_million(
            figures, log_bytes, trips_per_job, payload_bytes=how.pop("payload_bytes", payload), init_ms=init_ms, **how
        )

    kinds = {
        # a kind without a round-trip figure (a leaf: a rare root check) waits through each request
        name: priced(
            figures,
            trips[name]["round_trips_per_batch"] / BATCH if name in trips else figures["dynamodb_requests_per_job"],
        )
        for name, figures in jobkit.items()
    }
    plain = jobkit["plain"]
    kinds[f"plain, {LARGE_PAYLOAD_BYTES // 1024} KB of params"] = priced(plain, 0, payload_bytes=LARGE_PAYLOAD_BYTES)
    if side_by_side is not None:
        for name, figures in side_by_side["results"].items():
            if name.startswith("jobkit"):
                waited = figures["billed_ms_per_million_jobs"] / 1e6  # billed ms per job, logging and metrics included
                kinds[f"waits {side_by_side['wait_ms']} ms, {name.removeprefix('jobkit, ')}"] = priced(
                    {**plain, "cpu_us_per_job": 0.0}, 0, wait_ms_per_job=waited
                )
    return {
        "prices": PRICES,
        "assumptions": {
            "memory_gb": MEMORY_GB,
            "batch": BATCH,
            "dynamodb_latency_ms": DYNAMODB_LATENCY_MS,
            "log_bytes_per_job": round(log_bytes),
            "info_lines_per_job": logs["info_lines"],
            "payload_bytes": round(payload),
            "platform_log_bytes_per_invocation": PLATFORM_LOG_BYTES_PER_INVOCATION,
            "cold_start_share": COLD_START_SHARE,
            "init_ms": round(init_ms, 1),
            "jobs_per_month_for_log_tiers": 100e6,
        },
        "dollars_per_million_jobs": kinds,
        "idle_queue": idle_cost_per_queue_month(),
    }
