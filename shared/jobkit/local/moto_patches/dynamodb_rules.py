"""What DynamoDB refuses that moto does not: its expression limits, applied to
the embedded moto so that the local stack fails where AWS would
(docs/aws-differences.md lists each).

DynamoDB refuses a request whose expression string is over 4 KB, or whose
expression holds more than 300 operators or functions ("Service, account,
and table quotas in Amazon DynamoDB", Expression parameters), with a
``ValidationException``. moto takes any length, and its parser crashes on
some long expressions instead of answering. The count here is the one AWS's
own example counts: comparisons, ``AND``/``OR``/``NOT``, ``BETWEEN``, ``IN``,
functions, and an update's ``+`` and ``-``.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from typing import Any

#: DynamoDB's limits on one expression.
MAX_EXPRESSION_BYTES = 4096
MAX_OPERATORS = 300
EXPRESSIONS = ("UpdateExpression", "ConditionExpression", "KeyConditionExpression", "FilterExpression")
_OPERATORS = re.compile(
    r"<>|<=|>=|=|<|>|\b(?:AND|OR|NOT|BETWEEN|IN)\b|\b(?:attribute_exists|attribute_not_exists|attribute_type"
    r"|begins_with|contains|size|if_not_exists|list_append)\s*\(|[+-]",
    re.IGNORECASE,
)
_ACTIONS = ("update_item", "put_item", "delete_item", "query")


def operators(expression: str) -> int:
    """The operators and functions of an expression, as DynamoDB counts them (near enough)."""
    return len(_OPERATORS.findall(expression))


def check(body: dict[str, Any]) -> str | None:
    """Why DynamoDB would refuse a request with these parameters, or None."""
    for name in EXPRESSIONS:
        expression = body.get(name)
        if not isinstance(expression, str):
            continue
        if len(expression.encode("utf-8")) > MAX_EXPRESSION_BYTES:
            return f"Invalid {name}: Expression size has exceeded the maximum allowed size of {MAX_EXPRESSION_BYTES}"
        count = operators(expression)
        if count > MAX_OPERATORS:
            return f"Invalid {name}: The expression contains too many operators; operator count: {count}"
    return None


@contextlib.contextmanager
def dynamodb_rules() -> Iterator[None]:
    handler: Any = importlib.import_module("moto.dynamodb.responses").DynamoHandler
    refusal: Any = importlib.import_module("moto.dynamodb.exceptions").MockValidationException
    originals = {name: getattr(handler, name) for name in _ACTIONS}

    def checked(original: Callable[..., Any]) -> Callable[..., Any]:
        def action(self: Any) -> Any:
            why = check(getattr(self, "body", None) or {})
            if why is not None:
                raise refusal(why)
            return original(self)

        return action

    for name, original in originals.items():
        setattr(handler, name, checked(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(handler, name, original)
