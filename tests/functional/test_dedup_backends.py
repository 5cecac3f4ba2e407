"""The backend contract: the in-memory backend and DynamoDB on moto give the
same answers to the same conditional writes, with the same scoping: a key
that repeats in another type or domain never meets the other's records."""

from __future__ import annotations

from jobkit.records import FailureRecord, FinalAttempt, JobState, JobStatus
from jobkit.records.keys import JobRef
from jobkit.records.store import Records

SIG = "a" * 40
JOB = JobRef("t", "enwiki", "job-1")

FAR = 2**31


def test_root_timestamps_only_move_forward(records: Records) -> None:
    assert records.advance_root("t", "enwiki", SIG, 10.5, FAR) == 10.5
    assert records.advance_root("t", "enwiki", SIG, 9.0, FAR) == 10.5  # older: the stored one wins
    assert records.advance_root("t", "enwiki", SIG, 10.5, FAR) == 10.5  # equal: unchanged
    assert records.advance_root("t", "enwiki", SIG, 11.25, FAR) == 11.25
    assert records.advance_root("t", "enwiki", "b" * 40, 1.0, FAR) == 1.0


def test_roots_are_scoped_by_type_and_domain(records: Records) -> None:
    assert records.advance_root("t", "enwiki", SIG, 10.0, FAR) == 10.0
    assert records.advance_root("u", "enwiki", SIG, 1.0, FAR) == 1.0  # another type
    assert records.advance_root("t", "dewiki", SIG, 2.0, FAR) == 2.0  # another domain
    assert records.advance_root("t", None, SIG, 3.0, FAR) == 3.0  # no domain is not a domain
    assert records.advance_root("t", "-", SIG, 4.0, FAR) == 4.0  # a domain spelled like "none" is still a domain


def test_a_live_claim_blocks_until_released(records: Records) -> None:
    assert records.claim_duplicate("t", "h", "a", now=100, lease_until=160, enqueued_at=90, expires_at=FAR).won
    lost = records.claim_duplicate("t", "h", "b", now=101, lease_until=161, enqueued_at=95, expires_at=FAR)
    assert (lost.won, lost.holder, lost.lease_until, lost.last_success_start) == (False, "a", 160, None)
    records.release_duplicate("t", "h", "a", None, FAR)  # a failed: no success recorded
    assert records.claim_duplicate("t", "h", "b", now=102, lease_until=162, enqueued_at=95, expires_at=FAR).won


def test_a_success_makes_earlier_enqueued_twins_duplicates(records: Records) -> None:
    assert records.claim_duplicate("t", "h", "a", now=100, lease_until=160, enqueued_at=90, expires_at=FAR).won
    records.release_duplicate("t", "h", "a", 100.0, FAR)
    older = records.claim_duplicate("t", "h", "b", now=101, lease_until=161, enqueued_at=99.5, expires_at=FAR)
    assert (older.won, older.last_success_start) == (False, 100.0)
    # enqueued exactly when the successful run started: not "started after", so it runs
    assert records.claim_duplicate("t", "h", "c", now=102, lease_until=162, enqueued_at=100.0, expires_at=FAR).won


def test_an_expired_lease_can_be_taken_over(records: Records) -> None:
    assert records.claim_duplicate("t", "h", "a", now=100, lease_until=110, enqueued_at=90, expires_at=FAR).won
    assert not records.claim_duplicate("t", "h", "b", now=109, lease_until=170, enqueued_at=95, expires_at=FAR).won
    assert records.claim_duplicate("t", "h", "b", now=111, lease_until=170, enqueued_at=95, expires_at=FAR).won
    # the lapsed owner's success still counts, as long as it is newer
    records.release_duplicate("t", "h", "a", 100.0, FAR)
    lost = records.claim_duplicate("t", "h", "c", now=112, lease_until=170, enqueued_at=96, expires_at=FAR)
    assert (lost.holder, lost.last_success_start) == ("b", 100.0)


def test_delivery_claims(records: Records) -> None:
    assert records.claim_delivery(JOB, "a", now=100, lease_until=160, expires_at=FAR).won
    running = records.claim_delivery(JOB, "b", now=101, lease_until=161, expires_at=FAR)
    assert (running.won, running.done, running.lease_until) == (False, False, 160)
    records.finish_delivery(JOB, "a", False, FAR)  # failed: released
    assert records.claim_delivery(JOB, "b", now=102, lease_until=162, expires_at=FAR).won
    records.finish_delivery(JOB, "b", True, FAR)
    done = records.claim_delivery(JOB, "c", now=200, lease_until=260, expires_at=FAR)
    assert (done.won, done.done, done.duplicate) == (False, True, False)


def test_a_delivery_claim_says_when_its_job_was_done_as_a_duplicate(records: Records) -> None:
    # A job skipped as a duplicate is done, but it did not run: a redelivery must not say it ran
    assert records.claim_delivery(JOB, "a", now=100, lease_until=160, expires_at=FAR).won
    records.finish_delivery(JOB, "a", True, FAR, duplicate=True)
    done = records.claim_delivery(JOB, "b", now=200, lease_until=260, expires_at=FAR)
    assert (done.won, done.done, done.duplicate) == (False, True, True)


def test_a_lapsed_delivery_claim_can_be_taken_over(records: Records) -> None:
    assert records.claim_delivery(JOB, "a", now=100, lease_until=110, expires_at=FAR).won
    assert records.claim_delivery(JOB, "b", now=111, lease_until=170, expires_at=FAR).won
    records.finish_delivery(JOB, "a", False, FAR)  # not a's claim any more: nothing released
    assert not records.claim_delivery(JOB, "c", now=112, lease_until=170, expires_at=FAR).won


def test_duplicate_claims_are_scoped_by_type(records: Records) -> None:
    assert records.claim_duplicate("t", "h", "a", now=100, lease_until=160, enqueued_at=90, expires_at=FAR).won
    assert records.claim_duplicate("u", "h", "b", now=100, lease_until=160, enqueued_at=90, expires_at=FAR).won


def test_delivery_claims_are_scoped_by_type_and_domain(records: Records) -> None:
    # Callers choose job IDs: the same ID in another domain or type is another job.
    assert records.claim_delivery(JOB, "a", now=100, lease_until=160, expires_at=FAR).won
    records.finish_delivery(JOB, "a", True, FAR)
    for other in (JobRef("t", "dewiki", "job-1"), JobRef("u", "enwiki", "job-1"), JobRef("t", None, "job-1")):
        assert records.claim_delivery(other, "b", now=101, lease_until=161, expires_at=FAR).won, other


def test_failure_records_newest_first(records: Records) -> None:
    for attempt in (1, 2, 3):
        records.put_failure(
            FailureRecord("job-1", "t", "enwiki", attempt, 100.0 + attempt, "E", f"failed {attempt}", "tb"), FAR
        )
    records.put_failure(FailureRecord("job-2", "t", None, 1, 50.0, "E", "other", "tb"), FAR)
    failures = records.runs("t", "job-1", 2)["enwiki"].failures
    assert [(r.attempt, r.message) for r in failures] == [(3, "failed 3"), (2, "failed 2")]
    assert {r.domain for r in failures} == {"enwiki"}
    assert records.runs("t", "nope", 5) == {}


def test_attempt_records_are_kept_per_domain_and_type(records: Records) -> None:
    records.put_failure(FailureRecord("job-1", "t", "a#b", 1, 100.0, "E", "in a#b", "tb", "non_retryable"), FAR)
    records.put_failure(FailureRecord("job-1", "t", "a", 1, 101.0, "E", "in a", "tb"), FAR)
    records.put_failure(FailureRecord("job-1", "u", "a", 1, 102.0, "E", "type u", "tb"), FAR)
    runs = records.runs("t", "job-1", 10)
    assert set(runs) == {"a#b", "a"}  # a domain holding the separator reads back whole
    [in_ab] = runs["a#b"].failures
    assert (in_ab.message, in_ab.dead_letter_reason) == ("in a#b", "non_retryable")
    assert [r.message for r in runs["a"].failures] == ["in a"]


def test_the_final_attempt_shares_the_jobs_partition(records: Records) -> None:
    final = FinalAttempt(JOB, attempt=3, message_id="m-1", started_at=200.0)
    records.put_failure(FailureRecord("job-1", "t", "enwiki", 2, 150.0, "E", "second", "tb"), FAR)
    records.put_final(final, FAR)
    runs = records.runs("t", "job-1", 10)["enwiki"]
    assert runs.final == final and [r.attempt for r in runs.failures] == [2]
    records.put_final(FinalAttempt(JOB, 3, "m-1", 200.0, succeeded_at=201.5), FAR)
    assert records.runs("t", "job-1", 10)["enwiki"].final == FinalAttempt(JOB, 3, "m-1", 200.0, 201.5)
    assert records.runs("t", "job-1", 10).get("dewiki") is None


def test_deferral_records_by_message(records: Records) -> None:
    assert records.deferral("t", "m-1") is None
    records.put_deferral("t", "m-1", 2, FAR)
    assert records.deferral("t", "m-1") == 2
    assert records.deferral("u", "m-1") is None


def test_status_records_per_domain(records: Records) -> None:
    running = JobStatus("job-1", "t", "enwiki", JobState.RUNNING, 1, 100.0, started_at=100.0)
    records.put_status(running, FAR)
    records.put_status(JobStatus("job-1", "t", None, JobState.SUCCEEDED, 1, 101.0), FAR)
    assert sorted(records.statuses("t", "job-1"), key=lambda s: s.updated_at) == [
        running,
        JobStatus("job-1", "t", None, JobState.SUCCEEDED, 1, 101.0),
    ]
    assert records.statuses("u", "job-1") == []
