"""The backend contract: the in-memory backend and DynamoDB on moto give the
same answers to the same conditional writes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobkit.config import Declaration
from jobkit.dedup import DedupBackend, FailureRecord
from jobkit.dedup_dynamodb import DynamoDBDedupBackend
from jobkit.dedup_memory import MemoryDedupBackend
from jobkit.local.provision import provision_table

FAR = 2**31


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: Any, test_declaration: Declaration) -> Iterator[DedupBackend]:
    if request.param == "memory":
        yield MemoryDedupBackend()
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        provision_table(client, test_declaration)
        yield DynamoDBDedupBackend(client, test_declaration.table_name)


def test_root_timestamps_only_move_forward(backend: DedupBackend) -> None:
    assert backend.advance_root("k", 10.5, FAR) == 10.5
    assert backend.advance_root("k", 9.0, FAR) == 10.5  # older: the stored one wins
    assert backend.advance_root("k", 10.5, FAR) == 10.5  # equal: unchanged
    assert backend.advance_root("k", 11.25, FAR) == 11.25
    assert backend.advance_root("other", 1.0, FAR) == 1.0


def test_a_live_claim_blocks_until_released(backend: DedupBackend) -> None:
    assert backend.claim_duplicate("h", "a", now=100, lease_until=160, enqueued_at=90, expires_at=FAR).won
    lost = backend.claim_duplicate("h", "b", now=101, lease_until=161, enqueued_at=95, expires_at=FAR)
    assert (lost.won, lost.holder, lost.lease_until, lost.last_success_start) == (False, "a", 160, None)
    backend.release_duplicate("h", "a", None, FAR)  # a failed: no success recorded
    assert backend.claim_duplicate("h", "b", now=102, lease_until=162, enqueued_at=95, expires_at=FAR).won


def test_a_success_makes_earlier_enqueued_twins_duplicates(backend: DedupBackend) -> None:
    assert backend.claim_duplicate("h", "a", now=100, lease_until=160, enqueued_at=90, expires_at=FAR).won
    backend.release_duplicate("h", "a", 100.0, FAR)
    older = backend.claim_duplicate("h", "b", now=101, lease_until=161, enqueued_at=99.5, expires_at=FAR)
    assert (older.won, older.last_success_start) == (False, 100.0)
    # enqueued exactly when the successful run started: not "started after", so it runs
    assert backend.claim_duplicate("h", "c", now=102, lease_until=162, enqueued_at=100.0, expires_at=FAR).won


def test_an_expired_lease_can_be_taken_over(backend: DedupBackend) -> None:
    assert backend.claim_duplicate("h", "a", now=100, lease_until=110, enqueued_at=90, expires_at=FAR).won
    assert not backend.claim_duplicate("h", "b", now=109, lease_until=170, enqueued_at=95, expires_at=FAR).won
    assert backend.claim_duplicate("h", "b", now=111, lease_until=170, enqueued_at=95, expires_at=FAR).won
    # the lapsed owner's success still counts, as long as it is newer
    backend.release_duplicate("h", "a", 100.0, FAR)
    lost = backend.claim_duplicate("h", "c", now=112, lease_until=170, enqueued_at=96, expires_at=FAR)
    assert (lost.holder, lost.last_success_start) == ("b", 100.0)


def test_delivery_claims(backend: DedupBackend) -> None:
    assert backend.claim_delivery("job-1", "a", now=100, lease_until=160, expires_at=FAR).won
    running = backend.claim_delivery("job-1", "b", now=101, lease_until=161, expires_at=FAR)
    assert (running.won, running.done, running.lease_until) == (False, False, 160)
    backend.finish_delivery("job-1", "a", False, FAR)  # failed: released
    assert backend.claim_delivery("job-1", "b", now=102, lease_until=162, expires_at=FAR).won
    backend.finish_delivery("job-1", "b", True, FAR)
    done = backend.claim_delivery("job-1", "c", now=200, lease_until=260, expires_at=FAR)
    assert (done.won, done.done) == (False, True)


def test_a_lapsed_delivery_claim_can_be_taken_over(backend: DedupBackend) -> None:
    assert backend.claim_delivery("job-1", "a", now=100, lease_until=110, expires_at=FAR).won
    assert backend.claim_delivery("job-1", "b", now=111, lease_until=170, expires_at=FAR).won
    backend.finish_delivery("job-1", "a", False, FAR)  # not a's claim any more: nothing released
    assert not backend.claim_delivery("job-1", "c", now=112, lease_until=170, expires_at=FAR).won


def test_failure_records_newest_first(backend: DedupBackend) -> None:
    for attempt in (1, 2, 3):
        backend.put_failure(
            FailureRecord("job-1", "t", "enwiki", attempt, 100.0 + attempt, "E", f"failed {attempt}", "tb"), FAR
        )
    backend.put_failure(FailureRecord("job-2", "t", None, 1, 50.0, "E", "other", "tb"), FAR)
    records = backend.failures("job-1", 2)
    assert [(r.attempt, r.message, r.domain) for r in records] == [(3, "failed 3", "enwiki"), (2, "failed 2", "enwiki")]
    assert backend.failures("nope", 5) == []
