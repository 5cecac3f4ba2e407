"""Runner overhead per job: jobkit's runner against Powertools' BatchProcessor with
Idempotency (DynamoDB persistence), on a no-op job, with moto in its own process.

Per job: DynamoDB requests (counted on every botocore client in the process) and
the runner's CPU time, for a plain job, a remove_duplicates job (when it runs,
and when it is a duplicate), a leaf of a root job, a job of a cancellable
type when nothing is cancelled, and a batch's member (pushed, then ending; the
batch is not sealed, so no callback is pushed: the cost of every member but
the last), and a job of a priority lane (pushed, then run from the lane's
queue). Events are built as the
event source mapping delivers them; on success the runner needs no SQS call.
"""

from __future__ import annotations

import time
from typing import Any

from _common import ROOT, ApiCalls, aws_environment, moto_server

BATCH = 10


def _declaration() -> Any:
    from jobkit.declaration.config import parse_declaration

    types = {
        "plain": {"class": "bench_jobs:NoopJob"},
        "dedup": {"class": "bench_jobs:NoopJob", "remove_duplicates": True},
        "leaf": {"class": "bench_jobs:NoopJob"},
        "cancellable": {"class": "bench_jobs:NoopJob", "cancellable": True},
        "member": {"class": "bench_jobs:NoopJob", "batches": True},
        "done": {"class": "bench_jobs:NoopJob", "batch_callback": True},
        "laned": {"class": "bench_jobs:NoopJob", "priorities": {"high": 2}},
    }
    return parse_declaration({"jobkit": {"prefix": "bench"}, "types": types}, source="bench")


def _events(specs: list[Any], sent_at: float | None = None, queue_arn: str | None = None) -> list[dict[str, Any]]:
    """Lambda events of the jobs, sent (SQS's SentTimestamp) at ``sent_at``, or
    now, from the queue ``queue_arn`` (a priority lane's, say), or a stand-in's."""
    from jobkit.testing import sqs_event

    sent = time.time() if sent_at is None else sent_at
    where = {} if queue_arn is None else {"queue_arn": queue_arn}
    return [sqs_event(specs[i : i + BATCH], now=sent, **where) for i in range(0, len(specs), BATCH)]


def _measure(handler: Any, events: list[dict[str, Any]], jobs: int, calls: ApiCalls) -> dict[str, float]:
    from jobkit.testing import FakeLambdaContext

    calls.reset()
    cpu = time.process_time()
    for event in events:
        response = handler(event, FakeLambdaContext(timeout_s=60))
        assert not response["batchItemFailures"], response
    cpu = time.process_time() - cpu
    return {
        "dynamodb_requests_per_job": calls.total("dynamodb.") / jobs,
        "dynamodb_writes_per_job": calls.dynamodb_writes / jobs,
        "sqs_requests_per_job": calls.total("sqs.") / jobs,
        "cpu_us_per_job": cpu / jobs * 1e6,
    }


def _jobkit(jobs: int, calls: ApiCalls) -> dict[str, dict[str, float]]:
    import boto3

    from jobkit import JobSpecification
    from jobkit.core.spec import new_root_job_params
    from jobkit.local.provision import provision_table
    from jobkit.wiring import AwsClients, Wiring

    declaration = _declaration()
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    provision_table(dynamodb, declaration)
    # Built as a runner Lambda builds itself: one runner per queue.
    wiring = Wiring(declaration, clients=AwsClients(clients={"dynamodb": dynamodb, "sqs": sqs}))
    runners = {queue: wiring.runner(queue) for queue in declaration.queues}
    root = new_root_job_params("bench:root", time.time() - 1)
    leaf_params = {k: v for k, v in root.items() if k != "rootJobIsSelf"}
    sent = time.time() - 1
    twins = [JobSpecification("dedup", {"page": n}).stamped(sent) for n in range(jobs)]

    def measured(
        queue: str, specs: list[Any], expected: str, sent_at: float | None = None, queue_arn: str | None = None
    ) -> dict[str, float]:
        runner = runners[queue]
        outcomes: list[str] = []

        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            results = runner.process(event, context)
            outcomes.extend(str(r.outcome) for r in results)
            return {"batchItemFailures": [r.message_id for r in results if r.report_failure]}

        figures = _measure(handler, _events(specs, sent_at, queue_arn), jobs, calls)
        assert set(outcomes) == {expected}, (queue, expected, set(outcomes))  # the figure is of that path
        return figures

    results = {
        "plain": measured("plain", [JobSpecification("plain", {"n": n}) for n in range(jobs)], "succeeded"),
        "remove_duplicates, runs": measured("dedup", twins, "succeeded", sent),
        # twins sent with the originals, before those ran: duplicates of their successful runs
        "remove_duplicates, duplicate": measured(
            "dedup", [t.replace(id=f"twin-{t.id}") for t in twins], "duplicate", sent
        ),
        "leaf": measured("leaf", [JobSpecification("leaf", {"n": n, **leaf_params}) for n in range(jobs)], "succeeded"),
        # nothing cancelled: one read of the type's cancellations per batch
        "cancellable, nothing cancelled": measured(
            "cancellable", [JobSpecification("cancellable", {"n": n}) for n in range(jobs)], "succeeded"
        ),
    }
    # A batch's members: pushed through the app's path (counted in, ten to a push), then ending
    sqs.create_queue(QueueName=declaration.queue_name("member"))
    batch = wiring.group("bench").batch(on_complete=JobSpecification("done", {}), id="bench")
    members = [JobSpecification("member", {"n": n}, id=f"m{n}") for n in range(jobs)]
    calls.reset()
    cpu = time.process_time()
    for first in range(0, jobs, BATCH):
        batch.push(members[first : first + BATCH])
    cpu = time.process_time() - cpu
    results["batch member, pushed"] = {
        "dynamodb_requests_per_job": calls.total("dynamodb.") / jobs,
        "dynamodb_writes_per_job": calls.dynamodb_writes / jobs,
        "cpu_us_per_job": cpu / jobs * 1e6,  # the push's own, SQS sends included
    }
    ended = [m.replace(batch="bench", domain="bench") for m in members]
    results["batch member, ends"] = measured("member", ended, "succeeded")
    # A priority lane: pushed to the lane's queue (SQS requests, as any push), then run from it
    lane = declaration.queue_name("laned-high")
    sqs.create_queue(QueueName=declaration.queue_name("laned"))
    sqs.create_queue(QueueName=lane)
    laned = [JobSpecification("laned", {"n": n}, priority="high") for n in range(jobs)]
    group = wiring.group("bench")
    group.push(JobSpecification("laned", {"warm": True}, priority="high"))  # the lane's URL, looked up once
    calls.reset()
    for first in range(0, jobs, BATCH):
        group.push(laned[first : first + BATCH])
    pushed = {"sqs_requests_per_job": calls.total("sqs.") / jobs}  # (a push's figure: run() keeps it apart)
    arn = f"arn:aws:sqs:us-east-1:123456789012:{lane}"
    results["priority lane, runs"] = measured("laned", laned, "succeeded", queue_arn=arn)
    results["_lane_push"] = pushed
    return results


def _powertools(jobs: int, calls: ApiCalls) -> dict[str, dict[str, float]]:
    import json

    import boto3
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    dynamodb = boto3.client("dynamodb")
    dynamodb.create_table(
        TableName="bench-idempotency",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    persistence = DynamoDBPersistenceLayer(table_name="bench-idempotency", boto3_client=dynamodb)
    # The same notion of "the same job" as jobkit's dedup hash: the job's type and params.
    config = IdempotencyConfig(event_key_jmespath="[type, params]", use_local_cache=False)
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(data_keyword_argument="job", persistence_store=persistence, config=config)
    def run_job(job: dict[str, Any]) -> bool:
        return True

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event,
            record_handler=lambda record: run_job(job=json.loads(record.body)),
            processor=processor,
            context=context,
        )

    def plain_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return process_partial_response(
            event=event, record_handler=lambda record: json.loads(record.body), processor=processor, context=context
        )

    from jobkit import JobSpecification

    specs = [JobSpecification("dedup", {"page": n}) for n in range(jobs)]
    return {
        "plain (BatchProcessor only)": _measure(plain_handler, _events(specs), jobs, calls),
        "idempotent job, runs": _measure(handler, _events(specs), jobs, calls),
        "idempotent job, duplicate": _measure(
            handler, _events([s.replace(id=f"again-{s.id}") for s in specs]), jobs, calls
        ),
    }


def run(jobs: int = 2_000) -> dict[str, Any]:
    import logging
    import sys

    logging.disable(logging.WARNING)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    calls = ApiCalls()
    with moto_server() as endpoint, aws_environment(endpoint), calls.counting():
        jobkit = _jobkit(jobs, calls)
        lane_push = jobkit.pop("_lane_push")
        return {"jobs": jobs, "jobkit": jobkit, "powertools": _powertools(jobs, calls), "lane_push": lane_push}


if __name__ == "__main__":
    import json

    print(json.dumps(run(500), indent=2))
