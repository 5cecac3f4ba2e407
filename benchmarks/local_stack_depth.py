"""How the local stack's cost grows with queue depth (moto's SQS is O(depth) per message).

Compares plain moto (SendMessageBatch / ReceiveMessage / DeleteMessageBatch
through boto3, as any test would) with jobkit's local stack, which patches
moto's clock reads and retention check and skips empty queues, at several
depths: N jobs pushed at once, then drained. Also the interleaved pattern the
demo uses (push 10, run a round), which keeps the queue shallow.

    python benchmarks/local_stack_depth.py [--depths 250,500,1000,2000] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))


def plain_moto(depth: int) -> dict[str, float]:
    import boto3
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="plain")["QueueUrl"]
        began = time.perf_counter()
        for start in range(0, depth, 10):
            entries = [{"Id": str(i), "MessageBody": f"job {start + i}"} for i in range(min(10, depth - start))]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)
        pushed = time.perf_counter()
        received = 0
        while received < depth:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            received += len(messages)
            if messages:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
                )
        drained = time.perf_counter()
    return {"push_ms_per_job": (pushed - began) / depth * 1000, "drain_ms_per_job": (drained - pushed) / depth * 1000}


def local_stack(depth: int, *, interleaved: bool = False) -> dict[str, float]:
    from jobkit import JobSpecification
    from jobkit.clock import VirtualClock
    from jobkit.config import load_declaration
    from jobkit.local import LocalStack

    declaration = load_declaration(ROOT / "tests" / "fixtures" / "jobs.toml")
    with LocalStack(declaration, clock=VirtualClock(1_800_000_000.0)) as stack:
        group = stack.queue_group()
        specs = [JobSpecification("noop", {"n": n}) for n in range(depth)]
        began = time.perf_counter()
        if interleaved:
            for start in range(0, depth, 10):
                group.push(specs[start : start + 10])
                stack.poll_once()
            pushed = time.perf_counter()
            stack.drain()
            drained = time.perf_counter()
            return {"push_and_drain_ms_per_job": (drained - began) / depth * 1000}
        group.push(specs)
        pushed = time.perf_counter()
        stack.drain()
        drained = time.perf_counter()
    return {"push_ms_per_job": (pushed - began) / depth * 1000, "drain_ms_per_job": (drained - pushed) / depth * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", default="250,500,1000,2000")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    rows: list[dict[str, Any]] = []
    for depth in (int(d) for d in args.depths.split(",")):
        row = {
            "depth": depth,
            "plain_moto": plain_moto(depth),
            "local_stack": local_stack(depth),
            "local_stack_interleaved": local_stack(depth, interleaved=True),
        }
        rows.append(row)
        print(
            f"depth {depth:>5}: plain moto push {row['plain_moto']['push_ms_per_job']:.2f} ms/job, "
            f"drain {row['plain_moto']['drain_ms_per_job']:.2f}; local stack push "
            f"{row['local_stack']['push_ms_per_job']:.2f}, drain {row['local_stack']['drain_ms_per_job']:.2f}; "
            f"interleaved push+drain {row['local_stack_interleaved']['push_and_drain_ms_per_job']:.2f} ms/job",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"benchmark": "local_stack_depth", "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
