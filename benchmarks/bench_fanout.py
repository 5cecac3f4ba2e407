"""A root job with 10,000 leaves, then a newer root: DynamoDB requests per leaf, and
how many of the old root's leaves still run after the newer root is recorded.

8 runner containers (each with its own root cache) take batches of 10 leaves in
turn, 2 ms of virtual time per leaf; the newer root is recorded (as the push SDK
does) when half of the leaves have run. DynamoDB is moto in-process; only
requests are counted here, no time.
"""

from __future__ import annotations

import uuid
from typing import Any

from _common import ROOT, ApiCalls, aws_environment

CONTAINERS = 8
BATCH = 10
LEAF_TIME_S = 0.002


def run(leaves: int = 10_000) -> dict[str, Any]:
    import logging
    import sys

    logging.disable(logging.WARNING)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from moto import mock_aws

    with aws_environment(None), mock_aws():
        return _run(leaves)


def _run(leaves: int) -> dict[str, Any]:
    import boto3

    from jobkit import JobSpecification
    from jobkit.core.clock import VirtualClock
    from jobkit.core.outcome import Outcome
    from jobkit.core.spec import new_root_job_params
    from jobkit.declaration.config import parse_declaration
    from jobkit.local.provision import provision_table
    from jobkit.wiring import AwsClients, Wiring

    declaration = parse_declaration({"types": {"leaf": {"class": "bench_jobs:NoopJob"}}}, source="bench")
    clock = VirtualClock(1_800_000_000.0)
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    provision_table(dynamodb, declaration)
    # Each container built as a runner Lambda builds itself, with a root cache of its own.
    wiring = Wiring(declaration, clients=AwsClients(clients={"dynamodb": dynamodb, "sqs": sqs}), clock=clock)
    containers = [wiring.runner("leaf") for _ in range(CONTAINERS)]
    key = "htmlCacheUpdate:templatelinks:Template:Infobox"
    old_root = new_root_job_params(key, clock.now())
    wiring.store().roots.record_root(JobSpecification("leaf", old_root))
    old = [
        {"n": n, "rootJobSignature": old_root["rootJobSignature"], "rootJobTimestamp": old_root["rootJobTimestamp"]}
        for n in range(leaves)
    ]
    calls = ApiCalls()
    outcomes: list[Outcome] = []
    newer_recorded_at: float | None = None
    ran_after_newer = 0
    requests_before_newer = 0
    last_old_leaf_ran = 0.0
    with calls.counting():
        for number, start in enumerate(range(0, leaves, BATCH)):
            if newer_recorded_at is None and start >= leaves // 2:
                clock.advance(1)
                wiring.store().roots.record_root(JobSpecification("leaf", new_root_job_params(key, clock.now())))
                newer_recorded_at = clock.now()
                requests_before_newer = calls.total("dynamodb.")
            batch = old[start : start + BATCH]
            event = {"Records": [_record(JobSpecification("leaf", params).stamped(clock.now())) for params in batch]}
            results = containers[number % CONTAINERS].process(event)
            outcomes += [r.outcome for r in results]
            ran = sum(r.outcome is Outcome.SUCCEEDED for r in results)
            if newer_recorded_at is not None and ran:
                ran_after_newer += ran
                last_old_leaf_ran = clock.now() - newer_recorded_at
            clock.advance(LEAF_TIME_S * BATCH)
    return {
        "leaves": leaves,
        "containers": CONTAINERS,
        "dynamodb_requests": calls.total("dynamodb."),
        "dynamodb_requests_per_leaf": calls.total("dynamodb.") / leaves,
        "dynamodb_requests_first_half": requests_before_newer,
        "old_leaves_run_after_newer_root": ran_after_newer,
        "old_leaves_superseded": outcomes.count(Outcome.SUPERSEDED),
        "last_old_leaf_ran_s_after_newer_root": round(last_old_leaf_ran, 3),
    }


def _record(spec: Any) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "bench",
        "body": spec.to_message(),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobkit-leaf",
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
