"""Push throughput: jobkit's JobQueueGroup.push against a bare
send_message_batch loop with the same bodies (the fair anchor for a batching
pusher), a naive send_message loop and Celery's apply_async on its SQS
transport (kombu), all against the same moto endpoint. The pushers take turns,
a chunk each in a rotating order, so the machine's drift hits all alike.

Per job: SQS requests (counted on every botocore client in the process), client
CPU time (moto runs in its own process, so this is the pusher's cost alone), and
wall time (with moto in its own process on loopback, and in-process). Jobs are
pushed in chunks of 100, and the queue is emptied between chunks (not
counted), so moto's O(depth) send does not dominate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from _common import ROOT, ApiCalls, aws_environment, moto_server

CHUNK = 100
QUEUE = "bench-refreshLinks"


def _params(n: int) -> dict[str, Any]:
    return {"title": f"Page {n}", "causeAction": "edit", "causeAgent": "Bench"}


def _declaration() -> Any:
    from jobkit.declaration.config import parse_declaration

    return parse_declaration(
        {"jobkit": {"prefix": "bench"}, "types": {"refreshLinks": {"class": "jobtypes.refresh_links:RefreshLinksJob"}}},
        source="bench",
    )


def _pushers(endpoint_host: str | None) -> dict[str, Callable[[int, int], None]]:
    """name -> push(first, count); each is set up (clients, apps) before timing."""
    import boto3
    from celery import Celery

    from jobkit import JobQueueGroup, JobSpecification
    from jobkit.sqs import TYPE_ATTRIBUTE, string_attribute

    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    group = JobQueueGroup(declaration=_declaration(), sqs_client=sqs, queue_urls={QUEUE: url})

    def jobkit_push(first: int, count: int) -> None:
        group.push([JobSpecification("refreshLinks", _params(n), domain="enwiki") for n in range(first, first + count)])

    def bare_batches(first: int, count: int) -> None:
        # what a batching pusher cannot do with less: the same bodies and type attribute, 10 to a request
        now = time.time()
        attributes = {TYPE_ATTRIBUTE: string_attribute("refreshLinks")}
        bodies = [
            JobSpecification("refreshLinks", _params(n), domain="enwiki").stamped(now).to_message()
            for n in range(first, first + count)
        ]
        for start in range(0, len(bodies), 10):
            entries = [
                {"Id": str(i), "MessageBody": body, "MessageAttributes": attributes}
                for i, body in enumerate(bodies[start : start + 10])
            ]
            sqs.send_message_batch(QueueUrl=url, Entries=entries)

    def naive_push(first: int, count: int) -> None:
        for n in range(first, first + count):
            body = JobSpecification("refreshLinks", _params(n), domain="enwiki").stamped(time.time()).to_message()
            sqs.send_message(
                QueueUrl=url, MessageBody=body, MessageAttributes={TYPE_ATTRIBUTE: string_attribute("refreshLinks")}
            )

    broker = f"sqs://testing:testing@{endpoint_host}" if endpoint_host else "sqs://"
    app = Celery("bench", broker=broker)
    app.conf.update(
        broker_transport_options={
            "region": "us-east-1",
            "is_secure": False,
            "predefined_queues": {"celery": {"url": url}},
        },
        task_default_queue="celery",
    )

    @app.task(name="refreshLinks")
    def refresh_links(**params: Any) -> None:  # pragma: no cover - never run here
        return None

    def celery_push(first: int, count: int) -> None:
        for n in range(first, first + count):
            refresh_links.apply_async(kwargs=_params(n))

    return {
        "jobkit push()": jobkit_push,
        "bare send_message_batch loop": bare_batches,
        "send_message loop": naive_push,
        "Celery apply_async": celery_push,
    }


def _empty(url: str) -> None:
    import boto3

    sqs = boto3.client("sqs")
    sqs.delete_queue(QueueUrl=url)
    sqs.create_queue(QueueName=QUEUE)


def _measure(jobs: int, endpoint_host: str | None) -> dict[str, dict[str, float]]:
    import boto3

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    pushers = _pushers(endpoint_host)
    names = list(pushers)
    calls = {name: ApiCalls() for name in names}
    cpu, wall = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
    for turn, first in enumerate(range(0, jobs, CHUNK)):
        count = min(CHUNK, jobs - first)
        for name in names[turn % len(names) :] + names[: turn % len(names)]:  # a rotating order
            with calls[name].counting():
                cpu_before, wall_before = time.process_time(), time.perf_counter()
                pushers[name](first, count)
                cpu[name] += time.process_time() - cpu_before
                wall[name] += time.perf_counter() - wall_before
            _empty(url)
    return {
        name: {
            "sqs_requests_per_job": calls[name].total("sqs.") / jobs,
            "client_cpu_us_per_job": cpu[name] / jobs * 1e6,
            "wall_us_per_job": wall[name] / jobs * 1e6,
        }
        for name in names
    }


def run(jobs: int = 10_000, in_process_jobs: int = 2_000) -> dict[str, Any]:
    """Requests and client CPU with moto in its own process (``jobs`` each); wall
    time also with moto in-process (``in_process_jobs`` each: per-job figures
    are steady, and in-process moto is slow)."""
    import sys

    sys.path.insert(0, str(ROOT / "functions" / "runner"))
    with moto_server() as endpoint, aws_environment(endpoint):
        over_loopback = _measure(jobs, endpoint.removeprefix("http://"))
    from moto import mock_aws

    with aws_environment(None), mock_aws():
        in_process = _measure(min(jobs, in_process_jobs), None)
    for name, figures in over_loopback.items():
        figures["wall_us_per_job_in_process"] = in_process[name]["wall_us_per_job"]
    return {"jobs": jobs, "in_process_jobs": min(jobs, in_process_jobs), "results": over_loopback}


if __name__ == "__main__":
    import json

    print(json.dumps(run(2_000), indent=2))
