"""Status tracking without AWS: the tracker's writes and throttling, fail-open,
input checks, the runner's skipped status, and the ``track_status`` key."""

from __future__ import annotations

from typing import Any

import pytest

from jobkit import Job, JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import ConfigError, JobKitError
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import declaration_to_dict, parse_declaration
from jobkit.records import TableUnavailable
from jobkit.records.memory import MemoryRecords
from jobkit.runner import Runner
from jobkit.status.tracker import MAX_RESULT_BYTES, JobState, JobStatus, RecordingStatusTracker

START = 1000.0


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(START)


@pytest.fixture
def backend() -> MemoryRecords:
    return MemoryRecords()


def tracker(backend: MemoryRecords, clock: VirtualClock, spec: JobSpecification) -> RecordingStatusTracker:
    return RecordingStatusTracker(backend, spec, 2, clock)


def status_of(backend: MemoryRecords, spec: JobSpecification) -> JobStatus:
    """What the backend holds (read without counting the read as a request)."""
    requests = backend.memory.requests
    (found,) = [s for s in backend.statuses(spec.type, spec.id) if s.domain == spec.domain]
    backend.memory.requests = requests
    return found


def test_an_attempt_writes_at_its_start_and_end_and_throttles_progress(
    backend: MemoryRecords, clock: VirtualClock
) -> None:
    spec = JobSpecification("t", domain="enwiki")
    status = tracker(backend, clock, spec)
    status.started(clock.now())
    assert status_of(backend, spec) == JobStatus(spec.id, "t", "enwiki", JobState.RUNNING, 2, START, started_at=START)
    writes = backend.requests
    status.report_progress(10)  # within 5 s of the start: kept for later
    clock.advance(4.9)
    status.report_progress(20)
    status.set_result({"rows": 7})  # never a write of its own
    assert backend.requests == writes
    clock.advance(0.1)
    status.report_progress(30)
    assert (backend.requests, status_of(backend, spec).progress) == (writes + 1, 30.0)
    clock.advance(1)
    status.succeeded(clock.now())
    final = status_of(backend, spec)
    assert (final.state, final.progress, final.result, final.finished_at) == (
        JobState.SUCCEEDED,
        100.0,
        '{"rows":7}',
        START + 6,
    )
    assert backend.requests == writes + 2


def test_failures_and_skips_say_why(backend: MemoryRecords, clock: VirtualClock) -> None:
    spec = JobSpecification("t")
    status = tracker(backend, clock, spec)
    status.started(clock.now())
    status.report_progress(40)
    status.failed(clock.now(), "E: " + "x" * 5000, will_retry=True)
    failed = status_of(backend, spec)
    assert (failed.state, failed.will_retry, failed.progress, len(failed.error or "")) == (
        JobState.FAILED,
        True,
        40.0,
        4096,
    )
    other = JobSpecification("t")
    tracker(backend, clock, other).skipped(clock.now(), "duplicate: an identical job ran")
    assert status_of(backend, other).note == "duplicate: an identical job ran"


class UnavailableBackend(MemoryRecords):
    """A table that refuses every status write, as a throttled one does."""

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        raise TableUnavailable("throttled")


def test_a_failed_status_write_is_logged_not_raised(clock: VirtualClock, caplog: pytest.LogCaptureFixture) -> None:
    status = RecordingStatusTracker(UnavailableBackend(), JobSpecification("t"), 1, clock)
    status.started(clock.now())
    clock.advance(10)
    status.report_progress(50)
    status.succeeded(clock.now())
    assert "could not record the status" in caplog.text


@pytest.mark.parametrize("percent", [-1, 100.5, "50", True, float("nan"), None])
def test_progress_must_be_a_percentage(percent: Any) -> None:
    # Checked for untracked types too, so a bug shows before tracking is on
    job = Job(JobSpecification("t"))
    with pytest.raises(JobKitError, match="progress must be"):
        job.report_progress(percent)


def test_a_result_must_be_small_json() -> None:
    job = Job(JobSpecification("t"))
    job.set_result({"ok": [1, 2.5, None]})
    with pytest.raises(JobKitError, match="JSON-serialisable"):
        job.set_result({"when": object()})
    with pytest.raises(JobKitError, match="bytes, over"):
        job.set_result("x" * MAX_RESULT_BYTES)


class NoQueue:
    """The runner's queue port, for runs that must not touch a queue."""

    def priority(self, record: Any) -> str | None:
        return None

    def change_visibility(self, record: Any, seconds: int) -> None:
        raise AssertionError("unexpected queue operation")

    def dead_letter(self, record: Any, reason: Any, now: float) -> None:
        raise AssertionError("unexpected queue operation")

    def requeue(self, record: Any, delay_s: int, extra_attributes: Any = None) -> str:
        raise AssertionError("unexpected queue operation")


def record(spec: JobSpecification) -> dict[str, Any]:
    return {
        "messageId": spec.id,
        "receiptHandle": "r",
        "body": spec.to_message(),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobkit-t",
    }


def test_the_runner_records_a_skipped_duplicate(backend: MemoryRecords, clock: VirtualClock) -> None:
    declaration = parse_declaration(
        {"types": {"t": {"class": "testjobs:NoopJob", "remove_duplicates": True, "track_status": True}}}, source="t"
    )
    runner = Runner(declaration, queue="t", queues=NoQueue(), records=backend, clock=clock)
    # Given two identical jobs enqueued together, the first run a second later
    first, twin = (JobSpecification("t", {"page": "A"}).stamped(clock.now()) for _ in range(2))
    clock.advance(1)
    [ran] = runner.process({"Records": [record(first)]})
    [skipped] = runner.process({"Records": [record(twin)]})
    # Then the twin's status says it was skipped, and why
    assert (ran.outcome, skipped.outcome) == (Outcome.SUCCEEDED, Outcome.DUPLICATE)
    assert status_of(backend, first).state is JobState.SUCCEEDED
    twin_status = status_of(backend, twin)
    assert twin_status.state is JobState.SKIPPED and (twin_status.note or "").startswith("duplicate: ")


def test_track_status_is_declared_validated_and_serialised() -> None:
    declaration = parse_declaration(
        {"types": {"t": {"class": "m:C", "track_status": True}, "u": {"class": "m:C"}}}, source="j"
    )
    assert declaration.types["t"].track_status and not declaration.types["u"].track_status
    assert declaration_to_dict(declaration)["types"]["u"]["track_status"] is False
    assert parse_declaration(declaration_to_dict(declaration), source="d").types == declaration.types
    with pytest.raises(ConfigError, match=r"j: types\.t\.track_status: must be true or false, got 'yes'"):
        parse_declaration({"types": {"t": {"class": "m:C", "track_status": "yes"}}}, source="j")
