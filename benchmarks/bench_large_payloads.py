"""Large params: what a job costs with its params inline in its SQS message,
against offloaded to the payload bucket (jobkit.payloads), at 10 KB, 100 KB,
1 MB and 5 MB of params.

Measured through the production wiring (a Wiring with the payload bucket: the
app's group, the queue's runner), with moto in its own process so the client's
CPU is jobkit's alone: per job, the AWS requests of push and of the run by
operation, the pusher's and the runner's CPU, and the message's size. The
runner takes the messages as Lambda's event source mapping delivers them:
received from the queue, as many to an event as fit Lambda's 6 MB.

Then priced per million jobs (cost_model.PRICES, and S3's list prices below):
SQS bills each 64 KiB chunk of a request's payload as one request; an
offloaded job adds an S3 PUT (push), a GET and a PUT of the mark that says it
ended (its runner, which then removes the object: S3 does not bill deletes),
the object's storage until then, and the fetch's wait in Lambda's billed
duration (a typical in-region figure, not measured here).
"""

from __future__ import annotations

import time
from typing import Any

from _common import ROOT, ApiCalls, aws_environment, moto_server

SIZES = (10_000, 100_000, 1_000_000, 5_000_000)
#: S3 Standard, us-east-1, 2025 list prices (DELETE and lifecycle expiry are free)
S3_PRICES = {"put_per_thousand": 0.005, "get_per_thousand": 0.0004, "storage_per_gb_month": 0.023}
#: Hours an object is billed: from its push to its job's end (its runner removes it), taken as an hour
STORED_HOURS = 1.0
#: A GET's first byte, and the rate of its body into a 256 MB function (typical figures, not measured)
S3_FIRST_BYTE_MS, S3_BYTES_PER_S = 20.0, 50e6


def _declaration() -> Any:
    from jobkit.declaration.config import parse_declaration

    types = {
        "inline": {"class": "bench_jobs:NoopJob"},
        "offloaded": {"class": "bench_jobs:NoopJob", "offload_above_kb": 1},  # every job of these sizes
    }
    return parse_declaration({"jobkit": {"prefix": "bench"}, "types": types}, source="bench")


def _specs(job_type: str, size: int, jobs: int) -> list[Any]:
    """Jobs whose params are ``size`` bytes as JSON."""
    from jobkit import JobSpecification
    from jobkit.payloads.reference import params_bytes

    overhead = len(params_bytes({"n": 0, "blob": ""}))
    return [
        JobSpecification(job_type, {"n": n % 10, "blob": "x" * (size - overhead)}, domain="bench") for n in range(jobs)
    ]


def _measure(wiring: Any, sqs: Any, job_type: str, size: int, jobs: int, calls: ApiCalls) -> dict[str, Any]:
    import cost_model

    from jobkit.local.esm import sqs_event
    from jobkit.testing import FakeLambdaContext

    queue = wiring.declaration.types[job_type].queue
    url = sqs.get_queue_url(QueueName=wiring.declaration.queue_name(queue))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    group, runner = wiring.group("bench"), wiring.runner(queue)
    specs = _specs(job_type, size, jobs)
    calls.reset()
    cpu = time.process_time()
    for first in range(0, jobs, 10):
        group.push(specs[first : first + 10])
    push_cpu, pushed = time.process_time() - cpu, dict(calls.calls)
    messages: list[dict[str, Any]] = []
    while len(messages) < jobs:  # (the event source mapping's receives: not counted)
        got = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=600,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        messages += got
    message_bytes = sum(len(m["Body"].encode("utf-8")) for m in messages) / jobs
    per_event = cost_model.batches(message_bytes)[1]
    calls.reset()
    cpu = time.process_time()
    for first in range(0, jobs, per_event):
        results = runner.process(sqs_event(messages[first : first + per_event], arn), FakeLambdaContext(timeout_s=60))
        assert all(r.outcome == "succeeded" for r in results), [r.outcome for r in results]
    run_cpu, ran = time.process_time() - cpu, dict(calls.calls)
    for message in messages:  # (the event source mapping's deletes: not counted)
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return {
        "jobs": jobs,
        "message_bytes": round(message_bytes),
        "push_requests_per_job": {name: n / jobs for name, n in sorted(pushed.items())},
        "run_requests_per_job": {name: n / jobs for name, n in sorted(ran.items())},
        "push_cpu_us_per_job": round(push_cpu / jobs * 1e6, 1),
        "run_cpu_us_per_job": round(run_cpu / jobs * 1e6, 1),
    }


def priced(figures: dict[str, Any], size: int, offloaded: bool) -> dict[str, float]:
    """$ per million jobs of the measured figures: SQS, Lambda (requests and compute), S3."""
    import cost_model

    p = cost_model.PRICES
    message = figures["message_bytes"]
    invoked = cost_model.batches(message)[1]
    # PUTs: the push's upload, and the runner's mark that the job ended
    s3_put = figures["push_requests_per_job"].get("s3.PutObject", 0.0)
    s3_put += figures["run_requests_per_job"].get("s3.PutObject", 0.0)
    s3_get = figures["run_requests_per_job"].get("s3.GetObject", 0.0)
    fetch_ms = (S3_FIRST_BYTE_MS + size / S3_BYTES_PER_S * 1000) * s3_get
    duration_s = figures["run_cpu_us_per_job"] / 1e6 + fetch_ms / 1000
    stored_gb_months = size / 1024**3 * STORED_HOURS / (30 * 24) if offloaded else 0.0
    costs = {
        "sqs": cost_model.sqs_requests_per_job(message) * p["sqs_per_million_requests"],
        "lambda": p["lambda_per_million_requests"] / invoked
        + duration_s * cost_model.MEMORY_GB * p["lambda_arm64_per_gb_second"] * 1e6,
        "s3": s3_put * S3_PRICES["put_per_thousand"] * 1000
        + s3_get * S3_PRICES["get_per_thousand"] * 1000
        + stored_gb_months * S3_PRICES["storage_per_gb_month"] * 1e6,
    }
    costs["total"] = sum(costs.values())
    return {name: round(value, 2) for name, value in costs.items()}


def break_even_kib(message_bytes: float = 400) -> int:
    """The params size over which offloading costs less than inline, priced as :func:`priced`
    prices SQS and S3: an inline job's body in its 64 KiB chunks, sent and received; an
    offloaded one's small message, S3's three requests and its storage (the fetch's wait
    and the CPU aside)."""
    import cost_model

    sqs = cost_model.PRICES["sqs_per_million_requests"] / 1e6
    s3_fixed = 2 * S3_PRICES["put_per_thousand"] / 1000 + S3_PRICES["get_per_thousand"] / 1000
    offloaded_sqs = cost_model.sqs_requests_per_job(message_bytes) * sqs
    for size in range(cost_model.SQS_CHUNK, 1024 * 1024 + 1, 1024):
        stored = size / 1024**3 * STORED_HOURS / (30 * 24) * S3_PRICES["storage_per_gb_month"]
        if offloaded_sqs + s3_fixed + stored < cost_model.sqs_requests_per_job(size) * sqs:
            return size // 1024
    return 1024  # never, within a message


def run(jobs: dict[int, int] | None = None) -> dict[str, Any]:
    """Each size's jobs inline (where a message holds them) and offloaded, on moto in its own process."""
    import sys

    import boto3

    from jobkit.local.provision import provision_bucket, provision_queues, provision_table
    from jobkit.wiring import AwsClients, Wiring

    sys.path.insert(0, str(ROOT / "benchmarks"))
    jobs = jobs or {10_000: 200, 100_000: 100, 1_000_000: 30, 5_000_000: 10}
    declaration = _declaration()
    results: dict[str, Any] = {}
    with moto_server() as endpoint, aws_environment(endpoint):
        sqs, dynamodb, s3 = boto3.client("sqs"), boto3.client("dynamodb"), boto3.client("s3")
        provision_queues(sqs, declaration)
        provision_table(dynamodb, declaration)
        bucket = provision_bucket(s3, declaration, "us-east-1")
        clients = AwsClients(clients={"sqs": sqs, "dynamodb": dynamodb, "s3": s3})
        wiring = Wiring(declaration, clients=clients, payload_bucket=bucket)
        calls = ApiCalls()
        with calls.counting():
            for size, count in jobs.items():
                row: dict[str, Any] = {}
                if size < 1024 * 1024 - 1024:  # what one message holds
                    inline = _measure(wiring, sqs, "inline", size, count, calls)
                    row["inline"] = {**inline, "dollars_per_million_jobs": priced(inline, size, False)}
                offloaded = _measure(wiring, sqs, "offloaded", size, count, calls)
                row["offloaded"] = {**offloaded, "dollars_per_million_jobs": priced(offloaded, size, True)}
                results[str(size)] = row
    return {
        "sizes": results,
        "s3_prices": S3_PRICES,
        "assumptions": {
            "stored_hours": STORED_HOURS,
            "s3_first_byte_ms": S3_FIRST_BYTE_MS,
            "s3_bytes_per_s": S3_BYTES_PER_S,
        },
        "break_even_kib": break_even_kib(),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run({10_000: 20, 100_000: 10, 1_000_000: 5, 5_000_000: 3}), indent=2))
