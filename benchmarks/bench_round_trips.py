"""Round trips per batch: how long a batch of 10 waits on DynamoDB.

Every request of the runner's DynamoDB client gets a modelled latency of 5 ms
(a same-region DynamoDB call), injected through a botocore event hook, with
moto in its own process. Per kind of job, over a number of batches of 10:

- ``round_trips_per_batch``: the longest chain of requests each sent after the
  one before returned (what the batch waited through, however many it sent);
- ``requests_per_batch``: the DynamoDB requests it sent;
- ``wall_ms_per_batch``: the batch's wall time, with the latency.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from _common import ROOT, aws_environment, moto_server

sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

BATCH = 10
LATENCY_S = 0.005


def _declaration() -> Any:
    from jobkit.declaration.config import parse_declaration

    types = {
        "dedup": {"class": "bench_jobs:NoopJob", "remove_duplicates": True},
        "once": {"class": "bench_jobs:NoopJob", "deliver_once": True},
        "plain": {"class": "bench_jobs:NoopJob"},
    }
    return parse_declaration({"jobkit": {"prefix": "trips"}, "types": types}, source="bench")


def run(batches: int = 20) -> dict[str, Any]:
    import boto3

    from jobkit import JobSpecification
    from jobkit.local.provision import provision_table
    from jobkit.testing import FakeLambdaContext, sqs_event
    from jobkit.wiring import AwsClients, Wiring

    from latency import ModelledLatency

    declaration = _declaration()
    results: dict[str, Any] = {"latency_ms": LATENCY_S * 1000, "batch": BATCH, "batches": batches, "kinds": {}}
    with moto_server() as endpoint, aws_environment(endpoint):
        dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
        provision_table(dynamodb, declaration)
        wiring = Wiring(declaration, clients=AwsClients(clients={"dynamodb": dynamodb, "sqs": sqs}))
        latency = ModelledLatency(dynamodb, LATENCY_S)
        kinds = {
            "remove_duplicates, runs": ("dedup", "page", "succeeded"),
            "remove_duplicates, duplicate": ("dedup", "page", "duplicate"),
            "deliver_once": ("once", "to", "succeeded"),
            "plain": ("plain", "n", "succeeded"),
        }
        sent = time.time() - 1
        twins = [
            [JobSpecification("dedup", {"page": f"{batch}-{n}"}).stamped(sent) for n in range(BATCH)]
            for batch in range(batches)
        ]
        for name, (queue, params, expected) in kinds.items():
            runner = wiring.runner(queue)
            trips, requests, walls = [], [], []
            for batch in range(batches):
                if queue == "dedup":  # the twins of the first pass are duplicates in the second
                    specs = [t if expected == "succeeded" else t.replace(id=f"twin-{t.id}") for t in twins[batch]]
                else:
                    specs = [JobSpecification(queue, {params: f"{batch}-{n}"}) for n in range(BATCH)]
                event = sqs_event(specs, now=sent)
                latency.reset()
                began = time.perf_counter()
                outcomes = {str(r.outcome) for r in runner.process(event, FakeLambdaContext(timeout_s=60))}
                walls.append((time.perf_counter() - began) * 1000)
                assert outcomes == {expected}, (name, outcomes)  # the figure is of that path
                trips.append(latency.round_trips())
                requests.append(latency.requests)
            results["kinds"][name] = {
                "round_trips_per_batch": statistics.median(trips),
                "max_round_trips_per_batch": max(trips),
                "requests_per_batch": statistics.median(requests),
                "wall_ms_per_batch": statistics.median(walls),
            }
        latency.remove()
    return results


if __name__ == "__main__":
    import json

    sys.path.insert(0, str(ROOT / "benchmarks"))
    print(json.dumps(run(10), indent=2))
