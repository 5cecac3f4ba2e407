"""De-duplication: root/leaf supersession, ignoreDuplicates claims, delivery
claims, and failure records.

:class:`DedupStore` holds the logic: what a record means, leases, the
per-container root cache, time-to-live, and fail-open. A :class:`DedupBackend`
stores the records: DynamoDB in production (:mod:`jobkit.dedup_dynamodb`),
memory in unit tests (:mod:`jobkit.dedup_memory`). Every backend write that can
lose is one conditional write that reports what it lost to, so no second read
is ever needed.

The semantics (DESIGN.md §4):

- **Supersession.** A record per (domain, type, rootJobSignature) holds the
  newest rootJobTimestamp seen; it only moves forward. A job whose timestamp is
  strictly older is superseded. The container caches the newest timestamp per
  root: an older leaf is superseded without a request, and a leaf that matches
  the newest is run without a request while the cache entry is fresh.
- **ignoreDuplicates.** Job J, enqueued at E(J), is a duplicate if a job with
  the same dedup hash *started after* E(J) *and succeeded*. J claims the hash
  before it runs; a twin that meets a live claim is deferred, not dropped; a
  failed run releases the claim so twins run::

      t ─────────────────────────────────────────────────────────────►
      E(T1)   E(J)     J claims, starts at S      J succeeds: last_success_start = S
        │      │        │                          │
        T1 arrives while J holds the claim ─► deferred; later: S > E(T1) ─► duplicate
                             E(T2) > S ─► T2 is not a duplicate of J: it runs

- **Delivery claims** (``deliver_once`` types) claim the job ID, so a second
  delivery of the same message does not run it again.
- **Fail-open.** If the backend is unreachable or throttled, the job runs; the
  admission says so, and the runner logs and counts it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from jobkit.clock import Clock, SystemClock
from jobkit.errors import JobKitError
from jobkit.spec import JobSpecification

if TYPE_CHECKING:
    from jobkit.status import JobStatus

log = logging.getLogger(__name__)

DAY_S = 24 * 3600
ROOT_RECORD_TTL_S = 28 * DAY_S  # MediaWiki's JobQueue::ROOTJOB_TTL
DUPLICATE_RECORD_TTL_S = 7 * DAY_S  # longer than a job can wait in a queue (4 days' retention)
DELIVERY_RECORD_TTL_S = 7 * DAY_S
FAILURE_RECORD_TTL_S = 14 * DAY_S  # as long as the DLQ keeps the message


class DedupUnavailable(JobKitError):
    """The dedup store could not be reached or was throttled."""


# -- records -------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """The result of a conditional claim: won, or what it lost to."""

    won: bool
    holder: str | None = None  # the owner token of a live claim
    lease_until: float | None = None  # when that live claim lapses
    last_success_start: float | None = None  # duplicate claims: start of the last successful run
    done: bool = False  # delivery claims: the job already ran to success


@dataclass(frozen=True)
class FailureRecord:
    """One failed attempt of a job."""

    job_id: str
    job_type: str
    domain: str | None
    attempt: int
    at: float
    error_class: str
    message: str
    traceback: str


class DedupBackend(Protocol):
    """Record storage. Every method may raise :class:`DedupUnavailable`."""

    def advance_root(self, key: str, timestamp: float, expires_at: int) -> float:
        """Set the root's newest timestamp to ``timestamp`` if that is newer.
        Returns the newest stored timestamp after the call."""
        ...

    def claim_duplicate(
        self, key: str, owner: str, now: float, lease_until: float, enqueued_at: float, expires_at: int
    ) -> Claim:
        """Claim a dedup hash, unless a live claim is held (lease_until > now)
        or a run that started after ``enqueued_at`` succeeded."""
        ...

    def release_duplicate(self, key: str, owner: str, success_started_at: float | None, expires_at: int) -> None:
        """Release the owner's claim, recording a successful run's start if given."""
        ...

    def claim_delivery(self, job_id: str, owner: str, now: float, lease_until: float, expires_at: int) -> Claim:
        """Claim a job ID, unless it already succeeded or a live claim is held."""
        ...

    def finish_delivery(self, job_id: str, owner: str, succeeded: bool, expires_at: int) -> None:
        """Mark the job done on success; release the claim on failure."""
        ...

    def put_failure(self, record: FailureRecord, expires_at: int) -> None: ...

    def failures(self, job_id: str, limit: int) -> list[FailureRecord]:
        """A job's failure records, newest first."""
        ...

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        """Store a job's status record (see :mod:`jobkit.status`), replacing the previous one."""
        ...

    def status(self, job_id: str) -> JobStatus | None:
        """A job's status record, if it has one."""
        ...


# -- admission -------------------------------------------------------------------------


class Verdict(StrEnum):
    RUN = "run"
    SUPERSEDED = "superseded"
    DUPLICATE = "duplicate"
    DEFER = "defer"
    REDELIVERED = "redelivered"


@dataclass(frozen=True)
class Candidate:
    """What the store needs to know about a job about to run."""

    spec: JobSpecification
    ignore_duplicates: bool
    dedup_hash: str | None
    deliver_once: bool
    lease_until: float


@dataclass
class Admission:
    """The store's answer, and the claims to settle when the attempt ends."""

    verdict: Verdict
    reason: str = ""
    defer_s: int = 0
    unavailable: bool = False
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    duplicate_key: str | None = None  # set when this attempt holds a duplicate claim
    delivery_job_id: str | None = None  # set when this attempt holds a delivery claim


class DedupStore:
    """De-duplication logic over a :class:`DedupBackend`.

    Args:
        backend: where records live.
        clock: the time source.
        root_cache_ttl_s: how long a container trusts that a root timestamp it
            saw is still the newest. Older leaves are superseded from the cache
            at any age (timestamps only grow); within this window a newer root
            pushed elsewhere may let some old leaves run, which costs work, never
            correctness.
        root_cache_size: roots remembered per container.
        max_defer_s: the longest a twin waits before it looks again.
    """

    def __init__(
        self,
        backend: DedupBackend,
        *,
        clock: Clock | None = None,
        root_cache_ttl_s: float = 15.0,
        root_cache_size: int = 10_000,
        max_defer_s: int = 10,
    ) -> None:
        self.backend = backend
        self._clock = clock or SystemClock()
        self._root_cache_ttl_s = root_cache_ttl_s
        self._root_cache_size = root_cache_size
        self._max_defer_s = max_defer_s
        self._roots: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (newest, confirmed at)
        self._lock = threading.Lock()

    # -- roots --------------------------------------------------------------------

    @staticmethod
    def root_key(spec: JobSpecification) -> str:
        return f"{spec.domain or ''}#{spec.type}#{spec.root_job_signature}"

    def record_root(self, spec: JobSpecification) -> None:
        """Record a root job's timestamp (MediaWiki's deduplicateRootJob).

        Raises:
            DedupUnavailable: the store could not be written.
        """
        timestamp = spec.root_job_timestamp
        if spec.root_job_signature is None or timestamp is None:
            raise JobKitError(f"{spec.type} {spec.id}: has no root job params")
        key = self.root_key(spec)
        newest = self.backend.advance_root(key, timestamp, self._expiry(ROOT_RECORD_TTL_S))
        self._remember_root(key, newest)

    def _root_verdict(self, spec: JobSpecification) -> Verdict:
        timestamp = spec.root_job_timestamp
        assert timestamp is not None
        key = self.root_key(spec)
        now = self._clock.now()
        with self._lock:
            cached = self._roots.get(key)
        if cached is not None:
            newest, confirmed_at = cached
            if timestamp < newest:
                return Verdict.SUPERSEDED
            if timestamp == newest and now - confirmed_at < self._root_cache_ttl_s:
                return Verdict.RUN
        newest = self.backend.advance_root(key, timestamp, self._expiry(ROOT_RECORD_TTL_S))
        self._remember_root(key, newest)
        return Verdict.SUPERSEDED if timestamp < newest else Verdict.RUN

    def _remember_root(self, key: str, newest: float) -> None:
        now = self._clock.now()
        with self._lock:
            previous = self._roots.get(key)
            if previous is None or newest >= previous[0]:
                self._roots[key] = (newest, now)
            self._roots.move_to_end(key)
            while len(self._roots) > self._root_cache_size:
                self._roots.popitem(last=False)

    # -- admission ------------------------------------------------------------------

    def admit(self, candidate: Candidate) -> Admission:
        """Decide whether a job runs now. Never raises for store errors: it fails open."""
        spec = candidate.spec
        admission = Admission(Verdict.RUN)
        try:
            if spec.has_root_job_params() and self._root_verdict(spec) is Verdict.SUPERSEDED:
                return Admission(Verdict.SUPERSEDED, "a newer root job with the same signature was recorded")
            if candidate.deliver_once:
                verdict = self._claim_delivery(candidate, admission)
                if verdict is not None:
                    return verdict
            if candidate.ignore_duplicates and candidate.dedup_hash is not None:
                verdict = self._claim_duplicate(candidate, admission)
                if verdict is not None:
                    self._settle_delivery_claim(admission, succeeded=verdict.verdict is Verdict.DUPLICATE)
                    return verdict
        except DedupUnavailable as exc:
            log.warning(
                "dedup store unavailable, running %s %s anyway (fail-open): %s",
                spec.type,
                spec.id,
                exc,
                extra={"job_id": spec.id, "job_type": spec.type, "domain": spec.domain},
            )
            admission.unavailable = True
        return admission

    def _claim_delivery(self, candidate: Candidate, admission: Admission) -> Admission | None:
        now = self._clock.now()
        claim = self.backend.claim_delivery(
            candidate.spec.id, admission.owner, now, candidate.lease_until, self._expiry(DELIVERY_RECORD_TTL_S)
        )
        if claim.won:
            admission.delivery_job_id = candidate.spec.id
            return None
        if claim.done:
            return Admission(Verdict.REDELIVERED, "this job ID already ran to success")
        return Admission(Verdict.DEFER, "this job ID is running elsewhere", self._defer_s(claim, now))

    def _claim_duplicate(self, candidate: Candidate, admission: Admission) -> Admission | None:
        spec = candidate.spec
        assert candidate.dedup_hash is not None and spec.enqueued_at is not None
        key = candidate.dedup_hash
        now = self._clock.now()
        claim = self.backend.claim_duplicate(
            key, admission.owner, now, candidate.lease_until, spec.enqueued_at, self._expiry(DUPLICATE_RECORD_TTL_S)
        )
        if claim.won:
            admission.duplicate_key = key
            return None
        if claim.last_success_start is not None and claim.last_success_start > spec.enqueued_at:
            return Admission(Verdict.DUPLICATE, "an identical job started after this one was enqueued, and succeeded")
        return Admission(Verdict.DEFER, "an identical job is running", self._defer_s(claim, now))

    def _defer_s(self, claim: Claim, now: float) -> int:
        remaining = (claim.lease_until or now) - now
        return max(1, min(self._max_defer_s, int(-(-remaining // 1))))

    def finish(self, admission: Admission, *, succeeded: bool, started_at: float) -> bool:
        """Settle the claims of an attempt that ran. Returns False if the store
        was unavailable (the claims then lapse with their leases)."""
        try:
            if admission.duplicate_key is not None:
                self.backend.release_duplicate(
                    admission.duplicate_key,
                    admission.owner,
                    started_at if succeeded else None,
                    self._expiry(DUPLICATE_RECORD_TTL_S),
                )
            self._settle_delivery_claim(admission, succeeded=succeeded)
        except DedupUnavailable as exc:
            log.warning("dedup store unavailable while releasing claims; they lapse with their leases: %s", exc)
            return False
        return True

    def _settle_delivery_claim(self, admission: Admission, *, succeeded: bool) -> None:
        if admission.delivery_job_id is not None:
            self.backend.finish_delivery(
                admission.delivery_job_id, admission.owner, succeeded, self._expiry(DELIVERY_RECORD_TTL_S)
            )

    # -- failure records ---------------------------------------------------------------

    def record_failure(self, record: FailureRecord) -> bool:
        """Write a failure record (kept 14 days). Returns False if the store was unavailable."""
        try:
            self.backend.put_failure(record, self._expiry(FAILURE_RECORD_TTL_S))
        except DedupUnavailable as exc:
            log.warning("could not write the failure record of %s: %s", record.job_id, exc)
            return False
        return True

    def failures(self, job_id: str, limit: int = 20) -> list[FailureRecord]:
        """A job's failure records, newest first."""
        return self.backend.failures(job_id, limit)

    def _expiry(self, ttl_s: int) -> int:
        return int(self._clock.now()) + ttl_s
