"""What the local stack changes or reads of moto's internals, checked when a
stack starts: a moto it was not written for fails there, loudly, naming what
is missing, instead of a change that silently does nothing (or a metric that
silently stops).

pyproject.toml holds moto to the major version these were written for; the
check holds the installed one to it too (a project that pins moto itself can
install another).
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

#: The major version of moto the local stack was written for.
MOTO_MAJOR = 5

#: (module, dotted attribute) of every moto internal the local stack changes or reads.
NEEDED: tuple[tuple[str, str], ...] = (
    ("moto.core.utils", "utcnow"),
    ("moto.core.responses", "method_names_from_class"),
    ("moto.core.responses", "camelcase_to_underscores"),
    ("moto.sqs.models", "unix_time"),
    ("moto.sqs.models", "unix_time_millis"),
    ("moto.sqs.models", "camelcase_to_underscores"),
    ("moto.sqs.models", "generate_receipt_handle"),
    ("moto.sqs.models", "sqs_backends"),
    ("moto.sqs.models", "Queue.delete_message"),
    ("moto.sqs.models", "Message.mark_received"),
    ("moto.sqs.models", "Message.change_visibility"),
    ("moto.sqs.models", "Message.delay"),
    ("moto.sqs.models", "SQSBackend.receive_message"),
    ("moto.sqs.models", "SQSBackend.send_message"),
    ("moto.sqs.models", "SQSBackend.send_message_batch"),
    ("moto.sqs.models", "SQSBackend.change_message_visibility"),
    ("moto.sqs.models", "SQSBackend.is_message_valid_based_on_retention_period"),
    ("moto.sqs.models", "ReceiptHandleIsInvalid"),
    ("moto.sqs.models", "InvalidParameterValue"),
    ("moto.sqs.exceptions", "SQSException"),
    ("moto.dynamodb.models", "DynamoDBBackend.put_item"),
    ("moto.dynamodb.models", "DynamoDBBackend.get_item"),
    ("moto.dynamodb.models", "DynamoDBBackend.batch_get_item"),
    ("moto.dynamodb.models", "DynamoDBBackend.query"),
    ("moto.dynamodb.models", "DynamoDBBackend.scan"),
    ("moto.dynamodb.models", "DynamoDBBackend.update_item"),
    ("moto.dynamodb.models", "DynamoDBBackend.delete_item"),
    ("moto.dynamodb.models", "DynamoDBBackend.transact_write_items"),
    ("moto.dynamodb.models", "DynamoDBBackend.get_table"),
    ("moto.dynamodb.responses", "DynamoHandler.transact_get_items"),
    ("moto.dynamodb.models", "copy"),
    ("moto.dynamodb.models.table", "Table"),
    ("moto.dynamodb.models", "DynamoDBBackend.execute_statement"),
    ("moto.dynamodb.models", "DynamoDBBackend.execute_transaction"),
    ("moto.dynamodb.models", "DynamoDBBackend.batch_execute_statement"),
    ("moto.dynamodb.models.table", "Table.query"),
    ("moto.dynamodb.responses", "DynamoHandler"),
    ("moto.dynamodb.exceptions", "MockValidationException"),
    ("moto.dynamodb.parsing.validators", "deepcopy"),
    ("moto.dynamodb.parsing.validators", "Validator.validate"),
    ("moto.dynamodb.parsing.expressions", "UpdateExpressionParser.make"),
    ("moto.dynamodb.comparisons", "ConditionExpressionParser.parse"),
    ("moto.dynamodb.parsing.ast_nodes", "DepthFirstTraverser.nodes_to_be_processed"),
    ("moto.dynamodb.parsing.ast_nodes", "DepthFirstTraverser.process"),
    ("moto.dynamodb.parsing.ast_nodes", "DepthFirstTraverser.traverse_node_recursively"),
    ("moto.cloudwatch.models", "Statistics.get_statistics_for_type"),
    ("moto.cloudwatch.models", "cloudwatch_backends"),
    ("moto.logs.models", "logs_backends"),
    ("moto.logs.models", "LogStream.put_log_events"),
    ("moto.awslambda.urls", "url_paths"),
    ("moto.awslambda.responses", "LambdaResponse.dispatch"),
    ("moto.awslambda.models", "LambdaFunction.create_from_cloudformation_json"),
    ("moto.awslambda.models", "lambda_backends"),
    ("moto.moto_api._internal", "mock_random"),
)


class MotoUnsupported(RuntimeError):
    """The installed moto is not one the local stack was written for."""


def check_moto() -> None:
    """Raise :class:`MotoUnsupported`, naming the version and what is missing,
    unless the installed moto has everything the local stack changes or reads."""
    version = importlib.metadata.version("moto")
    if not version.split(".")[0].isdigit() or int(version.split(".")[0]) != MOTO_MAJOR:
        raise MotoUnsupported(
            f"jobkit's local stack was written for moto {MOTO_MAJOR}.x; moto {version} is installed:"
            f' pip install "moto[server]>={MOTO_MAJOR}.1,<{MOTO_MAJOR + 1}"'
        )
    missing = [f"{module}.{path}" for module, path in NEEDED if not _has(module, path)]
    if missing:
        raise MotoUnsupported(
            f"moto {version} lacks what jobkit's local stack changes or reads: {', '.join(missing)};"
            " install the moto version pyproject.toml names, or a newer jobkit"
        )


def _has(module: str, path: str) -> bool:
    try:
        owner: Any = importlib.import_module(module)
    except ImportError:
        return False
    for name in path.split("."):
        if name not in dir(owner):
            return False
        owner = getattr(owner, name)
    return True
