"""Push throughput: jobkit's JobQueueGroup.push against a naive send_message loop
and Celery's apply_async on its SQS transport (kombu), all against the same
moto endpoint.

Per job: SQS requests (counted on every botocore client in the process), client
CPU time (moto runs in its own process, so this is the pusher's cost alone), and
wall time (with moto in its own process on loopback, and in-process). Jobs are
pushed in chunks of 100, and the queue is emptied between chunks (not
counted), so moto's O(depth) send does not dominate.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
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

    return {"jobkit push()": jobkit_push, "send_message loop": naive_push, "Celery apply_async": celery_push}


def _empty(url: str) -> None:
    import boto3

    sqs = boto3.client("sqs")
    sqs.delete_queue(QueueUrl=url)
    sqs.create_queue(QueueName=QUEUE)


def _measure(jobs: int, endpoint_host: str | None) -> dict[str, dict[str, float]]:
    import boto3

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    results: dict[str, dict[str, float]] = {}
    for name, push in _pushers(endpoint_host).items():
        calls = ApiCalls()
        cpu = wall = 0.0
        with calls.counting():
            for first in range(0, jobs, CHUNK):
                count = min(CHUNK, jobs - first)
                cpu_before, wall_before = time.process_time(), time.perf_counter()
                push(first, count)
                cpu += time.process_time() - cpu_before
                wall += time.perf_counter() - wall_before
                with _paused(calls):
                    _empty(url)
        results[name] = {
            "sqs_requests_per_job": calls.total("sqs.") / jobs,
            "client_cpu_us_per_job": cpu / jobs * 1e6,
            "wall_us_per_job": wall / jobs * 1e6,
        }
    return results


@contextlib.contextmanager
def _paused(calls: ApiCalls) -> Iterator[None]:
    snapshot = calls.calls.copy()
    yield
    calls.calls.clear()
    calls.calls.update(snapshot)


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
