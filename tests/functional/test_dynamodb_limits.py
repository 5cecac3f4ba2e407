"""DynamoDB's expression limits (4 KB, 300 operators), which moto does not
apply and the local stack does (:mod:`jobkit.local.moto_patches.dynamodb_rules`), against
the one place jobkit's expressions grow with the data: reclaiming the
concurrency leases of containers that died holding them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chainjobs
import pytest
from botocore.exceptions import ClientError

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack
from jobkit.records.leases import Leases

from conftest import START

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LIMIT = 200


@pytest.fixture(scope="module")
def declaration() -> Declaration:
    echo = {"class": "chainjobs:EchoJob", "concurrency": {"key": "params.key", "limit": LIMIT}}
    return parse_declaration(
        {"jobkit": {"prefix": "ddblimits", "code_dir": str(FIXTURES)}, "types": {"echo": echo}}, source="test"
    )


@pytest.fixture
def stack(declaration: Declaration) -> Iterator[LocalStack]:
    chainjobs.TEXTS.clear()
    with LocalStack(declaration, clock=VirtualClock(START)) as local:
        yield local


def test_the_local_table_refuses_what_dynamodb_refuses(stack: LocalStack) -> None:
    table = stack.declaration.table_name
    terms = " AND ".join(f"#a = :v{n}" for n in range(151))  # 151 comparisons + 150 ANDs: 301 operators
    values = {f":v{n}": {"N": str(n)} for n in range(151)}
    key = {"pk": {"S": "x"}, "sk": {"S": "y"}}
    with pytest.raises(ClientError) as refused:
        stack.dynamodb.put_item(
            TableName=table,
            Item=key,
            ConditionExpression=terms,
            ExpressionAttributeNames={"#a": "a"},
            ExpressionAttributeValues=values,
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "too many operators" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError, match="maximum allowed size"):
        stack.dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET " + ", ".join(f"#a{n} = :v" for n in range(700)),
            ExpressionAttributeNames={f"#a{n}": f"a{n}" for n in range(700)},
            ExpressionAttributeValues={":v": {"N": "1"}},
        )


def test_a_key_whose_every_lease_holder_died_takes_jobs_again(stack: LocalStack) -> None:
    # Given a key whose 200 leases were all taken by containers that died (a crashed deploy)
    leases = Leases(stack.records.table)
    for _ in range(LIMIT):
        leases.acquire("echo", "=k", LIMIT, now=START, until=START + 60)
    assert len(leases.holders("echo", "=k")) == LIMIT
    # When their deadlines pass and a job of the key comes
    stack.clock.advance(120)
    stack.queue_group("enwiki").push(JobSpecification("echo", {"key": "k", "text": "after"}))
    stack.drain()
    # Then the ended leases are reclaimed within DynamoDB's limits, and the job runs
    assert chainjobs.TEXTS == ["after"]
    assert [r.outcome for r in stack.results.results][-1] is Outcome.SUCCEEDED
    # (ended leases beyond what the key needed are left for the next time it fills up)
    assert all(until < stack.clock.now() for until in leases.holders("echo", "=k").values())
    assert len(leases.holders("echo", "=k")) < LIMIT
