"""What flow control costs per job: DynamoDB requests, and SQS requests
beyond the event source mapping's own (receives and deletes), for each option,
on the local stack (moto in this process, a virtual clock).

Each case pushes its jobs at once and drains them; requests are counted at
the botocore level. "per job" divides by the jobs pushed.

- concurrency, one key per batch: a batch takes one lease and gives it back;
- concurrency, ten keys per batch: a lease per job;
- rate limit, one key, under the limit: a batch takes its tokens in one request;
- rate limit, one key, 10x over the limit: held jobs come back and try again;
- debounce, ten jobs of one key per batch: one registers, one claims;
- debounce, a key per job: each registers, hops and claims.
"""

from __future__ import annotations

import time
from typing import Any

from _common import ApiCalls, aws_environment

START = 1_800_000_000.0


def _declaration() -> Any:
    from jobkit.declaration.config import parse_declaration

    job = "bench_jobs:NoopJob"
    types = {
        "limited": {"class": job, "concurrency": {"key": "params.key", "limit": 2}},
        "rated": {"class": job, "rate_limit": {"key": "params.key", "per_second": 1000, "burst": 1000}},
        "throttled": {"class": job, "rate_limit": {"key": "params.key", "per_second": 10, "burst": 10}},
        "debounced": {"class": job, "debounce": {"key": "params.key", "wait_s": 30, "max_wait_s": 300}},
    }
    return parse_declaration({"jobkit": {"prefix": "flowbench"}, "types": types}, source="bench")


CASES: dict[str, tuple[str, Any]] = {
    "concurrency, one key per batch": ("limited", lambda n: "k"),
    "concurrency, ten keys per batch": ("limited", lambda n: f"k{n % 10}"),
    "rate limit, one key, under the limit": ("rated", lambda n: "k"),
    "rate limit, one key, 10x over the limit": ("throttled", lambda n: "k"),
    "debounce, ten jobs of one key per batch": ("debounced", lambda n: f"k{n // 10}"),
    "debounce, a key per job": ("debounced", lambda n: f"k{n}"),
}


def run(jobs: int = 1000) -> dict[str, Any]:
    from jobkit import JobSpecification
    from jobkit.core.clock import VirtualClock
    from jobkit.core.outcome import Outcome
    from jobkit.local import LocalStack

    results: dict[str, Any] = {"jobs": jobs, "cases": {}}
    calls = ApiCalls()
    with aws_environment(None), calls.counting():
        for name, (job_type, key) in CASES.items():
            with LocalStack(_declaration(), clock=VirtualClock(START), seed=1) as stack:
                count = jobs if job_type != "throttled" else max(10, jobs // 10)
                specs = [JobSpecification(job_type, {"key": key(n), "n": n}) for n in range(count)]
                stack.queue_group("bench").push(specs)
                calls.reset()
                began, wall = stack.clock.now(), time.perf_counter()
                stack.drain()
                wall = time.perf_counter() - wall
                outcomes = [r.outcome for r in stack.results.results]
                ran = outcomes.count(Outcome.SUCCEEDED)
                sqs_extra = sum(
                    n for op, n in calls.calls.items() if op.startswith("sqs.") and op.split(".")[1] == "SendMessage"
                )
                results["cases"][name] = {
                    "jobs": count,
                    "ran": ran,
                    "debounced": outcomes.count(Outcome.DEBOUNCED),
                    "held": outcomes.count(Outcome.LIMITED),
                    "dynamodb_requests_per_job": calls.total("dynamodb.") / count,
                    "sqs_sends_per_job": sqs_extra / count,
                    "virtual_s": round(stack.clock.now() - began, 1),
                    "wall_ms_per_job": wall / count * 1000,
                }
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
