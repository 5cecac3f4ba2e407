"""Builds a runner from a Lambda function's environment.

The deployed stack passes everything the runner needs in environment
variables, so an invocation never looks anything up:

``JOBKIT_DECLARATION``
    the declaration as JSON (``declaration_to_dict``), or ``JOBKIT_CONFIG``: a path to jobs.toml
``JOBKIT_PREFIX``
    the resource name prefix (the stage), overriding the declaration's
``JOBKIT_QUEUE_URLS``
    JSON object: SQS queue name -> URL, for the queues the function touches
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from jobkit.config import declaration_from_environment
from jobkit.runner import Runner


def runner_from_environment(environ: Mapping[str, str]) -> Runner:
    """Everything a runner container needs, built once: clients, dedup store, metrics."""
    import boto3
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
    from botocore.config import Config

    from jobkit.dedup import DedupStore
    from jobkit.metrics import EmfMetrics
    from jobkit.push import JobQueueGroup
    from jobkit.sqs import QueueDirectory, SqsQueues

    declaration = declaration_from_environment(environ)
    queue_urls: dict[str, str] = json.loads(environ.get("JOBKIT_QUEUE_URLS", "{}"))
    sqs: Any = boto3.client("sqs", config=Config(retries={"mode": "standard", "max_attempts": 3}))
    # Not named "jobkit": that is the package's own logger, which this one configures.
    logger = Logger(service=environ.get("JOBKIT_SERVICE", f"{declaration.prefix}-runner"))
    # jobkit's modules log to children of the "jobkit" logger; give it Powertools'
    # JSON handler, so their records carry job_id, job_type and domain as keys.
    logging.getLogger("jobkit")
    copy_config_to_registered_loggers(source_logger=logger, include={"jobkit"})
    store = DedupStore(_LazyBackend(declaration.table_name))
    group = JobQueueGroup(None, declaration=declaration, sqs_client=sqs, queue_urls=queue_urls, dedup_store=store)
    return Runner(
        declaration,
        queues=SqsQueues(sqs, QueueDirectory(sqs, declaration, queue_urls)),
        dedup=store,
        group_factory=group.for_domain,
        metrics=EmfMetrics(declaration.namespace),
    )


class _LazyBackend:
    """The DynamoDB backend, built on first use.

    A DynamoDB client (its service model) and pynamodb cost about 300 ms to
    load; a queue whose jobs never touch the jobs table (plain jobs that
    succeed) should not pay that on every cold start.
    """

    def __init__(self, table_name: str) -> None:
        self._table_name = table_name
        self._backend: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._backend is None:
            import boto3
            from botocore.config import Config

            from jobkit.dedup_dynamodb import DynamoDBDedupBackend

            # Few, quick retries: when the store is throttled the job runs anyway
            # (fail-open), so waiting long for it only delays the job.
            client = boto3.client(
                "dynamodb",
                config=Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=2, read_timeout=2),
            )
            self._backend = DynamoDBDedupBackend(client, self._table_name)
        return getattr(self._backend, name)
