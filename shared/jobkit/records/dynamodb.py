"""The jobs table on DynamoDB: the seven primitives of
:class:`~jobkit.records.table.Table`, each one request through an injected
boto3 client.

Keys are ``pk`` / ``sk``, ``expires_at`` is the TTL attribute. A losing
conditional update asks for ``ReturnValuesOnConditionCheckFailure=ALL_OLD``, so
it says what it lost to without a second read (and without a transaction,
which would cost twice the write units). Strings, numbers and booleans are
stored as ``S``, ``N`` and ``BOOL``; an attribute set to ``None`` is removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobkit.records import TableUnavailable
from jobkit.records.store import Records
from jobkit.records.table import (
    Absent,
    AllOf,
    AnyOf,
    AtLeast,
    AtMost,
    Below,
    Cancelled,
    Condition,
    ConditionFailed,
    Conflict,
    Equals,
    Item,
    Key,
    Value,
    Write,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

_KEY_NAMES = ("pk", "sk")


class DynamoDBTable:
    """The table ``table_name``, reached with ``client``, a boto3 DynamoDB
    client, or with the one ``connect`` makes on the first request. A DynamoDB
    client (its service model) costs about 300 ms to load, which a process
    whose jobs never touch the table should not pay; a client that cannot be
    made (no region, say) makes the table unavailable, like a throttled one.
    """

    def __init__(
        self, client: DynamoDBClient | None, table_name: str, *, connect: Callable[[], DynamoDBClient] | None = None
    ) -> None:
        if client is None and connect is None:
            raise TypeError("DynamoDBTable needs a client or a way to connect")
        self._client = client
        self._connect_with = connect
        self._table_name = table_name
        self._lock = threading.Lock()

    def get(self, key: Key) -> Item | None:
        response = self._call("get_item", {"Key": _key(key), "ConsistentRead": True})
        raw = response.get("Item")
        return _item(raw) if raw else None

    def put(self, key: Key, item: Item) -> None:
        stored = {name: _value(value) for name, value in item.items() if value is not None}
        self._call("put_item", {"Item": {**_key(key), **stored}})

    def update(
        self,
        key: Key,
        values: Item,
        remove: Sequence[str] = (),
        when: Condition | None = None,
        *,
        add: Mapping[str, int | float] | None = None,
        defaults: Item | None = None,
        want_old: bool = True,
        want_new: bool = False,
    ) -> Item | None:
        request = _update(Write(key, values, add or {}, when), remove, defaults or {})
        if when is not None and want_old:
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        if want_new:
            request["ReturnValues"] = "ALL_NEW"
        response = self._call("update_item", request)
        return _item(response.get("Attributes") or {}) if want_new else None

    def transact(self, writes: Sequence[Write]) -> None:
        from botocore.exceptions import ClientError

        items = [
            {"ConditionCheck": _check(write)} if write.check_only else {"Update": _update(write)} for write in writes
        ]
        for item in items:
            next(iter(item.values()))["TableName"] = self._table_name
        try:
            self._call("transact_write_items", {"TransactItems": items}, table=False)
        except TableUnavailable as unavailable:
            cause = unavailable.__cause__
            if not isinstance(cause, ClientError) or cause.response.get("Error", {}).get("Code") != (
                "TransactionCanceledException"
            ):
                raise
            codes = [reason.get("Code", "None") for reason in cause.response.get("CancellationReasons", [])]
            if "TransactionConflict" in codes and "ConditionalCheckFailed" not in codes:
                raise Conflict(f"a transaction met another on one of its items: {codes}") from None
            if not codes or any(code not in ("None", "ConditionalCheckFailed") for code in codes):
                raise  # a throttle, an error: tried again like any outage
            raise Cancelled(frozenset(n for n, code in enumerate(codes) if code == "ConditionalCheckFailed")) from None

    def get_many(self, keys: Sequence[Key], *, snapshot: bool = False) -> dict[Key, Item]:
        if snapshot:
            return self._snapshot(keys)
        found: dict[Key, Item] = {}
        request: dict[str, Any] = {
            "RequestItems": {self._table_name: {"Keys": [_key(key) for key in keys], "ConsistentRead": True}}
        }
        for _ in range(5):  # keys DynamoDB left unprocessed (throttled) are asked for again
            response = self._call("batch_get_item", request, table=False)
            for raw in response.get("Responses", {}).get(self._table_name, []):
                found[(raw["pk"]["S"], raw["sk"]["S"])] = _item(raw)
            left = response.get("UnprocessedKeys") or {}
            if not left:
                return found
            request = {"RequestItems": left}
        raise TableUnavailable("DynamoDB batch_get_item left keys unprocessed five times: throttled")

    def _snapshot(self, keys: Sequence[Key]) -> dict[Key, Item]:
        from botocore.exceptions import ClientError

        items = [{"Get": {"Key": _key(key), "TableName": self._table_name}} for key in keys]
        try:
            response = self._call("transact_get_items", {"TransactItems": items}, table=False)
        except TableUnavailable as unavailable:
            cause = unavailable.__cause__
            if isinstance(cause, ClientError) and "TransactionConflict" in str(cause.response):
                raise Conflict("a snapshot read met a transaction in flight on one of its items") from None
            raise
        return {
            key: _item(answer["Item"])
            for key, answer in zip(keys, response.get("Responses", []), strict=False)
            if answer.get("Item")
        }

    def delete(self, key: Key, when: Condition | None = None) -> bool:
        request: dict[str, Any] = {"Key": _key(key)}
        if when is not None:
            names: dict[str, str] = {}
            values: dict[str, AttributeValueTypeDef] = {}
            request["ConditionExpression"] = _condition(when, names, values)
            request["ExpressionAttributeNames"] = names
            if values:
                request["ExpressionAttributeValues"] = values
        try:
            self._call("delete_item", request)
        except ConditionFailed:
            return False
        return True

    def query(
        self, partition: str, sort_prefix: str | None = None, *, newest_first: bool = False, consistent: bool = False
    ) -> Iterator[tuple[str, Item]]:
        condition = "pk = :pk"
        values: dict[str, AttributeValueTypeDef] = {":pk": {"S": partition}}
        if sort_prefix is not None:
            condition += " AND begins_with(sk, :prefix)"
            values[":prefix"] = {"S": sort_prefix}
        request: dict[str, Any] = {
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": not newest_first,
            "ConsistentRead": consistent,
        }
        while True:
            response = self._call("query", dict(request))
            for raw in response.get("Items", []):
                yield raw["sk"]["S"], _item(raw)
            last = response.get("LastEvaluatedKey")
            if last is None:
                return
            request["ExclusiveStartKey"] = last

    def _call(self, operation: str, request: dict[str, Any], *, table: bool = True) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        if table:
            request["TableName"] = self._table_name
        try:
            return getattr(self._client or self._connect(), operation)(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConditionalCheckFailedException":
                raw = exc.response.get("Item")
                raise ConditionFailed(_item(raw) if raw else None) from None
            raise TableUnavailable(f"DynamoDB {operation} failed: {code}: {exc}") from exc
        except BotoCoreError as exc:
            raise TableUnavailable(f"DynamoDB {operation} failed: {exc}") from exc
        except (ValueError, TypeError) as exc:  # a request botocore could not serialise (say, a lone surrogate)
            raise TableUnavailable(f"DynamoDB {operation} could not be sent: {exc}") from exc

    def _connect(self) -> DynamoDBClient:
        with self._lock:
            if self._client is None:
                assert self._connect_with is not None
                self._client = self._connect_with()
            return self._client


class DynamoDBRecords(Records):
    """The record store over a :class:`DynamoDBTable`."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        super().__init__(DynamoDBTable(client, table_name))


def _update(write: Write, remove: Sequence[str] = (), defaults: Item | None = None) -> dict[str, Any]:
    """An UpdateItem request's key and expressions, as an update or a transaction's write."""
    names: dict[str, str] = {}
    placeholders: dict[str, AttributeValueTypeDef] = {}
    values = write.values
    sets = [f"{_name(names, n)} = {_placeholder(placeholders, v)}" for n, v in values.items() if v is not None]
    sets += [
        f"{_name(names, n)} = if_not_exists({_name(names, n)}, {_placeholder(placeholders, v)})"
        for n, v in (defaults or {}).items()
        if v is not None and n not in values
    ]
    adds = [f"{_name(names, n)} {_placeholder(placeholders, v)}" for n, v in write.add.items()]
    removes = [_name(names, n) for n in (*remove, *(n for n, v in values.items() if v is None))]
    clauses = [("SET", sets), ("ADD", adds), ("REMOVE", removes)]
    expression = " ".join(f"{verb} {', '.join(parts)}" for verb, parts in clauses if parts)
    request: dict[str, Any] = {
        "Key": _key(write.key),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
    }
    if write.when is not None:
        request["ConditionExpression"] = _condition(write.when, names, placeholders)
    if placeholders:
        request["ExpressionAttributeValues"] = placeholders
    return request


def _check(write: Write) -> dict[str, Any]:
    """A ConditionCheck of a transaction: the key and the condition, nothing written."""
    assert write.when is not None, "a condition check checks a condition"
    names: dict[str, str] = {}
    placeholders: dict[str, AttributeValueTypeDef] = {}
    request: dict[str, Any] = {
        "Key": _key(write.key),
        "ConditionExpression": _condition(write.when, names, placeholders),
        "ExpressionAttributeNames": names,
    }
    if placeholders:
        request["ExpressionAttributeValues"] = placeholders
    return request


def _key(key: Key) -> dict[str, AttributeValueTypeDef]:
    return {"pk": {"S": key[0]}, "sk": {"S": key[1]}}


def _value(value: Value) -> AttributeValueTypeDef:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        return {"N": repr(value)}
    if isinstance(value, str):
        return {"S": value}
    raise TypeError(f"cannot store {type(value).__name__} in the jobs table")


def _item(raw: Any) -> dict[str, Value]:
    item: dict[str, Value] = {}
    for name, typed in raw.items():
        if name in _KEY_NAMES:
            continue
        if "S" in typed:
            item[name] = typed["S"]
        elif "BOOL" in typed:
            item[name] = bool(typed["BOOL"])
        elif "N" in typed:
            text = typed["N"]
            item[name] = int(text) if text.lstrip("-").isdigit() else float(text)
        # NULL and other types: absent
    return item


def _name(names: dict[str, str], attr: str) -> str:
    for placeholder, known in names.items():
        if known == attr:
            return placeholder
    placeholder = f"#a{len(names)}"
    names[placeholder] = attr
    return placeholder


def _placeholder(values: dict[str, AttributeValueTypeDef], value: Value) -> str:
    placeholder = f":v{len(values)}"
    values[placeholder] = _value(value)
    return placeholder


def _condition(when: Condition, names: dict[str, str], values: dict[str, AttributeValueTypeDef]) -> str:
    """A condition as a DynamoDB ConditionExpression."""
    if isinstance(when, Absent):
        return f"attribute_not_exists({_name(names, when.attr)})"
    if isinstance(when, Equals | Below | AtMost | AtLeast):
        operator = {Equals: "=", Below: "<", AtMost: "<=", AtLeast: ">="}[type(when)]
        return f"{_name(names, when.attr)} {operator} {_placeholder(values, when.value)}"
    if isinstance(when, AnyOf | AllOf):
        joiner = " OR " if isinstance(when, AnyOf) else " AND "
        return "(" + joiner.join(_condition(part, names, values) for part in when.parts) + ")"
    raise TypeError(f"no DynamoDB form for {when!r}")
