"""DedupStore logic on the in-memory backend: verdicts, the root cache, fail-open."""

from __future__ import annotations

import pytest

from jobkit.core.clock import VirtualClock
from jobkit.core.spec import JobSpecification, new_root_job_params
from jobkit.dedup.admission import Candidate, Verdict
from jobkit.dedup.store import DedupStore
from jobkit.records import TableUnavailable
from jobkit.records.memory import MemoryRecords


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(1000.0)


@pytest.fixture
def backend() -> MemoryRecords:
    return MemoryRecords()


@pytest.fixture
def store(backend: MemoryRecords, clock: VirtualClock) -> DedupStore:
    return DedupStore(backend, clock=clock, root_cache_ttl_s=15)


def candidate(spec: JobSpecification, *, dedup: bool = False, once: bool = False, lease: float = 2000) -> Candidate:
    return Candidate(spec, dedup, spec.dedup_hash() if dedup else None, once, lease)


def leaf(timestamp: float, clock: VirtualClock, key: str = "k") -> JobSpecification:
    params = new_root_job_params(key, timestamp)
    del params["rootJobIsSelf"]
    return JobSpecification("leaf", params, domain="enwiki").stamped(clock.now())


def test_a_plain_job_asks_nothing(store: DedupStore, backend: MemoryRecords, clock: VirtualClock) -> None:
    assert store.admit(candidate(JobSpecification("noop").stamped(clock.now()))).verdict is Verdict.RUN
    assert backend.requests == 0


def test_the_root_cache_answers_superseded_without_a_request(
    store: DedupStore, backend: MemoryRecords, clock: VirtualClock
) -> None:
    assert store.admit(candidate(leaf(20.0, clock))).verdict is Verdict.RUN
    assert store.admit(candidate(leaf(10.0, clock))).verdict is Verdict.SUPERSEDED  # learnt from the store
    requests = backend.requests
    for _ in range(100):
        assert store.admit(candidate(leaf(10.0, clock))).verdict is Verdict.SUPERSEDED
        assert store.admit(candidate(leaf(20.0, clock))).verdict is Verdict.RUN
    assert backend.requests == requests


def test_the_root_cache_rechecks_the_newest_after_its_ttl(
    store: DedupStore, backend: MemoryRecords, clock: VirtualClock
) -> None:
    store.admit(candidate(leaf(20.0, clock)))
    backend.advance_root("leaf", "enwiki", leaf(0, clock).root_job_signature or "", 30.0, 0)
    assert store.admit(candidate(leaf(20.0, clock))).verdict is Verdict.RUN  # cached, still fresh
    clock.advance(15)
    assert store.admit(candidate(leaf(20.0, clock))).verdict is Verdict.SUPERSEDED


def test_a_newer_leaf_advances_the_root(store: DedupStore, backend: MemoryRecords, clock: VirtualClock) -> None:
    store.admit(candidate(leaf(20.0, clock)))
    assert store.admit(candidate(leaf(25.0, clock))).verdict is Verdict.RUN
    roots = [item["root_ts"] for (pk, _), item in backend.memory.items.items() if pk.startswith("leaf#root#")]
    assert roots == [25.0]


def test_record_root_then_older_leaves_are_superseded(store: DedupStore, clock: VirtualClock) -> None:
    store.roots.record_root(JobSpecification("leaf", new_root_job_params("k", 50.0), domain="enwiki"))
    assert store.admit(candidate(leaf(49.999, clock))).verdict is Verdict.SUPERSEDED
    assert store.admit(candidate(leaf(50.0, clock))).verdict is Verdict.RUN


def test_the_root_cache_is_bounded(backend: MemoryRecords, clock: VirtualClock) -> None:
    store = DedupStore(backend, clock=clock, root_cache_size=3)
    for n in range(10):
        store.admit(candidate(leaf(1.0, clock, key=f"k{n}")))
    assert len(store.roots) == 3


def test_duplicates_defer_then_skip(store: DedupStore, clock: VirtualClock) -> None:
    j, t = (JobSpecification("refreshLinks", {"title": "A"}).stamped(clock.now()) for _ in range(2))
    clock.advance(1)
    running = store.admit(candidate(j, dedup=True, lease=clock.now() + 4.2))
    assert running.verdict is Verdict.RUN and running.duplicate_key == j.dedup_hash()
    deferred = store.admit(candidate(t, dedup=True))
    assert (deferred.verdict, deferred.defer_s) == (Verdict.DEFER, 5)  # the holder's lease, rounded up
    store.finish(running, succeeded=True, started_at=clock.now())
    assert store.admit(candidate(t, dedup=True)).verdict is Verdict.DUPLICATE


def test_defer_is_capped(store: DedupStore, clock: VirtualClock) -> None:
    j, t = (JobSpecification("refreshLinks", {"title": "A"}).stamped(clock.now()) for _ in range(2))
    store.admit(candidate(j, dedup=True, lease=clock.now() + 900))
    assert store.admit(candidate(t, dedup=True)).defer_s == 10


class DownBackend(MemoryRecords):
    def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
        if name in {"advance_root", "claim_duplicate", "claim_delivery", "release_duplicate", "put_failure"}:

            def down(*args: object) -> None:
                raise TableUnavailable("throttled")

            return down
        return super().__getattribute__(name)


def test_fail_open(clock: VirtualClock) -> None:
    store = DedupStore(DownBackend(), clock=clock)
    spec = leaf(1.0, clock)
    admission = store.admit(candidate(spec, dedup=True, once=True))
    assert (admission.verdict, admission.unavailable) == (Verdict.RUN, True)
    assert store.finish(admission, succeeded=True, started_at=clock.now())  # held no claims: nothing to release
    with pytest.raises(TableUnavailable):
        store.roots.record_root(JobSpecification("leaf", new_root_job_params("k", 1.0)))
