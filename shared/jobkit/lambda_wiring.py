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
from collections.abc import Mapping
from typing import Any

from jobkit.config import Declaration, load_declaration, parse_declaration
from jobkit.runner import Runner


def declaration_from_environment(environ: Mapping[str, str]) -> Declaration:
    if "JOBKIT_DECLARATION" in environ:
        declaration = parse_declaration(json.loads(environ["JOBKIT_DECLARATION"]), source="$JOBKIT_DECLARATION")
    else:
        declaration = load_declaration(environ.get("JOBKIT_CONFIG"))
    prefix = environ.get("JOBKIT_PREFIX")
    return declaration.with_prefix(prefix) if prefix else declaration


def runner_from_environment(environ: Mapping[str, str]) -> Runner:
    import boto3
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
    from botocore.config import Config

    from jobkit.push import JobQueueGroup
    from jobkit.sqs import QueueDirectory, SqsQueues

    declaration = declaration_from_environment(environ)
    queue_urls: dict[str, str] = json.loads(environ.get("JOBKIT_QUEUE_URLS", "{}"))
    sqs: Any = boto3.client("sqs", config=Config(retries={"mode": "standard", "max_attempts": 3}))
    logger = Logger(service=environ.get("POWERTOOLS_SERVICE_NAME", "jobkit"))
    copy_config_to_registered_loggers(source_logger=logger, include={"jobkit", "jobkit.runner", "jobkit.push"})
    group = JobQueueGroup(None, declaration=declaration, sqs_client=sqs, queue_urls=queue_urls)
    return Runner(
        declaration,
        queues=SqsQueues(sqs, QueueDirectory(sqs, declaration, queue_urls)),
        group_factory=group.for_domain,
    )
