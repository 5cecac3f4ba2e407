"""What a job costs on the local stack as the queue gets deeper, up to 100,000 queued.

moto's SQS on its own is O(queue depth) per message: it computes all of a
queue's attributes for every message sent, scans the queue for every receive
and twice for every delete. The local stack indexes moto's queues
(``jobkit.local.moto_patches.indexed_queues``), so a job should cost the same at
any depth. For each depth D it starts a fresh stack, fills the queue to D
minus a sample, then measures pushing the sample (the queue going from
D - sample to D) and draining the sample through the runner (D down to
D - sample; a poll round may run a few more). So the figures at 100,000 are
for 5,000 jobs pushed onto, then drained from, a queue that holds from
95,000 to 100,000. Below the sample size, it pushes D jobs at once and
drains them all. Plain moto (boto3 on
``mock_aws``, as any test would use it) is measured at the small depths only:
it takes minutes at 2,000 already.

    python benchmarks/local_stack_depth.py [--depths 250,2000,10000,100000] [--sample 5000]
        [--plain-moto-depths 250,2000] [--json results.json]

``run()`` returns the figures for ``benchmarks/run.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))

DEPTHS = (250, 2_000, 10_000, 100_000)
SAMPLE = 5_000
PUSH_CHUNK = 1_000  # jobs per push() call while filling


def plain_moto(depth: int) -> dict[str, float]:
    """Push ``depth`` messages at once with SendMessageBatch, then receive and delete them all."""
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
    return {
        "push_ms_per_job": _ms_per_job(pushed - began, depth),
        "drain_ms_per_job": _ms_per_job(drained - pushed, depth),
    }


def local_stack(depth: int, sample: int = SAMPLE) -> dict[str, float]:
    """Fill a queue to ``depth`` on the local stack: push the last ``sample``
    jobs and drain as many, timing each, with the rest of the queue in place."""
    from jobkit import JobSpecification
    from jobkit.core.clock import VirtualClock
    from jobkit.declaration.config import load_declaration
    from jobkit.local import LocalStack

    sample = min(sample, depth)
    declaration = load_declaration(ROOT / "tests" / "fixtures" / "jobs.toml")
    with LocalStack(declaration, clock=VirtualClock(1_800_000_000.0)) as stack:
        group = stack.queue_group()
        specs = [JobSpecification("noop", {"n": n}) for n in range(depth)]
        began = time.perf_counter()
        for start in range(0, depth - sample, PUSH_CHUNK):
            group.push(specs[start : min(start + PUSH_CHUNK, depth - sample)])
        filled = time.perf_counter()
        group.push(specs[depth - sample :])
        pushed = time.perf_counter()
        drained_jobs = _drain(stack, sample)
        drained = time.perf_counter()
        left = sum(stack.queue_depth(queue) for queue in declaration.queues)
    return {
        "sample": sample,
        "fill_ms_per_job": _ms_per_job(filled - began, depth - sample),
        "push_ms_per_job": _ms_per_job(pushed - filled, sample),
        "drain_ms_per_job": _ms_per_job(drained - pushed, drained_jobs),
        "drained": drained_jobs,
        "queued_after_drain": left,
    }


def _drain(stack: Any, jobs: int) -> int:
    """Poll rounds until ``jobs`` jobs have run (a round may run a few more). Returns how many ran."""
    delivered = 0
    while delivered < jobs:
        batch = stack.poll_once()
        if not batch:
            raise RuntimeError(f"the queue ran dry after {delivered} of {jobs} jobs")
        delivered += batch
    return delivered


def _ms_per_job(seconds: float, jobs: int) -> float:
    return round(seconds / jobs * 1000, 3) if jobs else 0.0


def depth_label(depth: int) -> str:
    """250 -> "250", 2000 -> "2k", 100000 -> "100k": the suffix of :func:`run`'s keys."""
    return f"{depth // 1000}k" if depth >= 1000 and depth % 1000 == 0 else str(depth)


def run(
    depths: Sequence[int] = DEPTHS,
    *,
    sample: int = SAMPLE,
    plain_moto_depths: Sequence[int] = (250,),
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The local stack's cost per job at each depth (and plain moto's at ``plain_moto_depths``).

    Returns ``push_ms_per_job_at_{label}`` and ``drain_ms_per_job_at_{label}``
    for each depth (labels as :func:`depth_label`: 250, 2k, 10k, 100k), the
    rows behind them, and the wall time. ``on_row`` gets each row as it is measured."""
    began = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "local_stack_depth", "sample": sample, "rows": []}
    for depth in depths:
        row: dict[str, Any] = {"depth": depth, "local_stack": local_stack(depth, sample)}
        if depth in plain_moto_depths:
            row["plain_moto"] = plain_moto(depth)
        result["rows"].append(row)
        label = depth_label(depth)
        result[f"push_ms_per_job_at_{label}"] = row["local_stack"]["push_ms_per_job"]
        result[f"drain_ms_per_job_at_{label}"] = row["local_stack"]["drain_ms_per_job"]
        if on_row is not None:
            on_row(row)
    result["wall_s"] = round(time.perf_counter() - began, 1)
    return result


def describe(row: dict[str, Any]) -> str:
    local = row["local_stack"]
    line = (
        f"{row['depth']:>7,} queued: local stack push {local['push_ms_per_job']:.2f} ms/job, "
        f"drain {local['drain_ms_per_job']:.2f} ms/job ({local['sample']:,} jobs each; "
        f"{local['queued_after_drain']:,} left queued; filling {local['fill_ms_per_job']:.2f} ms/job)"
    )
    if "plain_moto" in row:
        plain = row["plain_moto"]
        line += f"; plain moto push {plain['push_ms_per_job']:.2f}, drain {plain['drain_ms_per_job']:.2f} ms/job"
    return line


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", default=",".join(str(d) for d in DEPTHS))
    parser.add_argument("--sample", type=int, default=SAMPLE, help="jobs pushed and drained at each depth")
    parser.add_argument("--plain-moto-depths", default="250,2000", help="depths to measure plain moto at too")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    result = run(
        _ints(args.depths),
        sample=args.sample,
        plain_moto_depths=_ints(args.plain_moto_depths),
        on_row=lambda row: print(describe(row), flush=True),
    )
    print(f"{result['wall_s']} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
