"""The cold-start benchmark's comparison: an SQS job handler built as Powertools
documents it, doing what jobkit's runner does for a remove_duplicates type:
BatchProcessor for partial batch failures, Idempotency on a DynamoDB table,
Logger and Metrics. Importing this module is that handler's cold start: the
persistence layer makes its boto3 DynamoDB client at import, as documented."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

logger = Logger(service="jobs")
metrics = Metrics(namespace="jobs")
processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name="jobs")
config = IdempotencyConfig(event_key_jmespath="[type, params]")


@idempotent_function(data_keyword_argument="job", persistence_store=persistence, config=config)
def run_job(job: dict[str, Any]) -> bool:
    return True


def record_handler(record: SQSRecord) -> None:
    run_job(job=json.loads(record.body))


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config.register_lambda_context(context)
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
