"""The local stack's memoised moto answers every DynamoDB call as moto does.

:func:`jobkit.local.moto_patches.memoised_moto` keeps moto's parsed update
expressions and conditions, copies parsed trees by unpickling them, and
looks up what each expression processor does with a type of node once. The
same random program of item operations (updates of every kind of action,
with and without conditions that pass and fail, with every ReturnValues;
puts, gets, conditional deletes, queries, invalid expressions) runs through
boto3 on moto twice, without and with it, and every answer must be the same.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from jobkit.local.moto_patches import memoised_moto, serial_dynamodb

STEPS = 300
TABLE = "jobs"
NAMES = {"#a": "a", "#b": "b", "#n": "n", "#l": "l", "#s": "s", "#m": "m", "#k": "k"}

#: (update expression, the names and values it uses)
UPDATES: list[tuple[str, list[str]]] = [
    ("SET #a = :a", ["#a", ":a"]),
    ("SET #a = :a, #b = :b REMOVE #m", ["#a", ":a", "#b", ":b", "#m"]),
    ("SET #n = if_not_exists(#n, :zero) + :one", ["#n", ":zero", ":one"]),
    ("SET #n = #n - :one", ["#n", ":one"]),
    ("SET #l = list_append(if_not_exists(#l, :empty), :items)", ["#l", ":empty", ":items"]),
    ("ADD #n :one, #s :set", ["#n", ":one", "#s", ":set"]),
    ("DELETE #s :set", ["#s", ":set"]),
    ("SET #m = :map", ["#m", ":map"]),
    ("SET #m.#k = :a", ["#m", "#k", ":a"]),
    ("REMOVE #a, #b", ["#a", "#b"]),
    ("REMOVE #l[0]", ["#l"]),
    ("SET #a = :a SET #b = :b", ["#a", ":a", "#b", ":b"]),  # two SET clauses: invalid
    ("SET #a = :a, #a = :b", ["#a", ":a", ":b"]),  # the same path twice: invalid
    ("SET pk = :a", [":a"]),  # a key attribute: invalid
]

CONDITIONS: list[tuple[str | None, list[str]]] = [
    (None, []),
    ("attribute_not_exists(#a)", ["#a"]),
    ("attribute_exists(#n) AND #n < :limit", ["#n", ":limit"]),
    ("(attribute_not_exists(#a) OR #a <> :a) AND (attribute_not_exists(#b) OR #b <= :b)", ["#a", ":a", "#b", ":b"]),
    ("attribute_not_exists(#l) OR size(#l) < :limit", ["#l", ":limit"]),
    ("contains(#s, :member)", ["#s", ":member"]),
]

RETURN_VALUES = ["NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"]


@contextlib.contextmanager
def dynamodb(*, memoised: bool) -> Iterator[Any]:
    with contextlib.ExitStack() as patches:
        patches.enter_context(serial_dynamodb())
        if memoised:
            patches.enter_context(memoised_moto())
        patches.enter_context(mock_aws())
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


class Program:
    """A random program of DynamoDB item operations; what each answered, in order."""

    def __init__(self, client: Any, seed: int) -> None:
        self.client = client
        self.rng = random.Random(seed)
        self.answers: list[Any] = []

    def run(self, steps: int) -> list[Any]:
        moves: list[tuple[int, Callable[[], None]]] = [
            (12, self.update),
            (2, self.put),
            (2, self.get),
            (2, self.delete),
            (1, self.query),
        ]
        for _ in range(steps):
            self.rng.choices([move for _, move in moves], [weight for weight, _ in moves])[0]()
        for partition in ("p0", "p1"):
            self.query(partition)
        return self.answers

    def key(self) -> dict[str, Any]:
        return {"pk": {"S": self.rng.choice(["p0", "p1"])}, "sk": {"S": f"s{self.rng.randrange(6)}"}}

    def values(self) -> dict[str, Any]:
        return {
            ":a": {"S": self.rng.choice(["x", "y"])},
            ":b": {"N": str(self.rng.randrange(5))},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":limit": {"N": str(self.rng.randrange(1, 6))},
            ":empty": {"L": []},
            ":items": {"L": [{"S": self.rng.choice(["i", "j"])}]},
            ":set": {"SS": [self.rng.choice(["u", "v", "w"])]},
            ":member": {"S": self.rng.choice(["u", "v", "w"])},
            ":map": {"M": {"k": {"S": "first"}}},
        }

    def call(self, operation: str, **request: Any) -> None:
        try:
            response = getattr(self.client, operation)(**request)
        except ClientError as error:
            self.answers.append((operation, "error", error.response["Error"], error.response.get("Item")))
            return
        response.pop("ResponseMetadata", None)
        response.pop("ConsumedCapacity", None)
        self.answers.append((operation, response))

    def update(self) -> None:
        expression, used = self.rng.choice(UPDATES)
        condition, used_by_condition = self.rng.choice(CONDITIONS)
        used = used + used_by_condition
        values = {k: v for k, v in self.values().items() if k in used}
        request: dict[str, Any] = {
            "TableName": TABLE,
            "Key": self.key(),
            "UpdateExpression": expression,
            "ExpressionAttributeNames": {k: v for k, v in NAMES.items() if k in used},
            "ReturnValues": self.rng.choice(RETURN_VALUES),
        }
        if values:
            request["ExpressionAttributeValues"] = values
        if condition is not None:
            request["ConditionExpression"] = condition
            if self.rng.random() < 0.5:
                request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        self.call("update_item", **request)

    def put(self) -> None:
        item = {**self.key(), "a": {"S": "put"}, "n": {"N": str(self.rng.randrange(4))}}
        self.call("put_item", TableName=TABLE, Item=item)

    def get(self) -> None:
        self.call("get_item", TableName=TABLE, Key=self.key(), ConsistentRead=True)

    def delete(self) -> None:
        self.call(
            "delete_item",
            TableName=TABLE,
            Key=self.key(),
            ConditionExpression="attribute_not_exists(#n) OR #n < :limit",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":limit": self.values()[":limit"]},
        )

    def query(self, partition: str | None = None) -> None:
        self.call(
            "query",
            TableName=TABLE,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": partition or self.rng.choice(["p0", "p1"])}, ":prefix": {"S": "s"}},
        )


def answers(seed: int, *, memoised: bool) -> list[Any]:
    with dynamodb(memoised=memoised) as client:
        return Program(client, seed).run(STEPS)


@pytest.mark.parametrize("seed", range(4))
def test_every_answer_is_moto_s(seed: int) -> None:
    expected = answers(seed, memoised=False)
    assert answers(seed, memoised=True) == expected
    outcomes = {(a[0], a[1] == "error") for a in expected}
    assert {("update_item", True), ("update_item", False), ("delete_item", True)} <= outcomes
