"""De-duplication: root/leaf supersession, ignoreDuplicates claims, delivery
claims; and the other records a runner keeps of a job's attempts.

:class:`DedupStore` holds the logic: what a record means, leases, the
per-container root cache, time-to-live, and fail-open. A
:class:`~jobkit.records.store.Records` stores the records: DynamoDB in
production (:mod:`jobkit.records.dynamodb`), memory in unit tests
(:mod:`jobkit.records.memory`). Every backend write that can lose is one
conditional write that reports what it lost to, so no second read is ever
needed.

The semantics (docs/deduplication.md):

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
- **Nothing skipped leaves a trace that skips others.** Claims come first; a
  job's root timestamp is written only once the job is sure to run (a root
  that is skipped as a duplicate must not supersede the leaves of the run it
  duplicates), and claims taken by a job that turns out superseded are released.
- **Fail-open.** If the backend is unreachable or throttled, the job runs; the
  admission says so, and the runner logs and counts it.
- **A batch at once.** :meth:`DedupStore.admit_batch` sends the claims of a
  batch's jobs together, so they take one round trip, not one each; a job that
  shares a claim key with an earlier job of the batch is admitted on its own
  turn instead, after that job's claims are settled, exactly as if the batch
  were admitted one job at a time. :meth:`DedupStore.settle_in_background`
  settles an attempt's claims while the next job runs; a later claim on the
  same key waits for it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from jobkit.clock import Clock, SystemClock
from jobkit.errors import SpecError
from jobkit.parallel import Parallel
from jobkit.records import (
    DEFERRAL_RECORD_TTL_S,
    DELIVERY_RECORD_TTL_S,
    DUPLICATE_RECORD_TTL_S,
    FAILURE_RECORD_TTL_S,
    FINAL_RECORD_TTL_S,
    ROOT_RECORD_TTL_S,
    Claim,
    DedupUnavailable,
    FailureRecord,
    FinalAttempt,
    JobRuns,
)
from jobkit.records.keys import JobRef
from jobkit.spec import MAX_CLOCK_SKEW_S, JobSpecification

if TYPE_CHECKING:
    from concurrent.futures import Future

    from jobkit.records.store import Records

log = logging.getLogger(__name__)

SUPERSEDED_REASON = "a newer root job with the same signature was recorded"
DUPLICATE_REASON = "an identical job started after this one was enqueued, and succeeded"


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
    #: It took its debounce window's run: the jobs it debounced count on it, so
    #: a root recorded while it waited does not skip it (it runs anyway).
    owes_run: bool = False

    @property
    def claim_keys(self) -> tuple[tuple[str | None, ...], ...]:
        """The records this job's admission may write: two jobs that share one
        must be admitted one after the other."""
        spec = self.spec
        keys: list[tuple[str | None, ...]] = []
        if self.deliver_once:
            keys.append(("delivery", spec.type, spec.domain, spec.id))
        if self.ignore_duplicates and self.dedup_hash is not None:
            keys.append(("duplicate", spec.type, self.dedup_hash))
        if spec.has_root_job_params():
            keys.append(("root", spec.type, spec.domain, spec.root_job_signature))
        return tuple(keys)


@dataclass
class Admission:
    """The store's answer, and the claims to settle when the attempt ends."""

    verdict: Verdict
    reason: str = ""
    defer_s: int = 0
    unavailable: bool = False
    job_type: str = ""
    duplicate_key: str | None = None  # set when this attempt holds a duplicate claim
    delivery: JobRef | None = None  # set when this attempt holds a delivery claim
    root_pending: bool = False  # claimed; the root is still to be checked (DedupStore.confirm_root)
    _owner: str | None = field(default=None, repr=False)

    @property
    def claim_keys(self) -> tuple[tuple[str | None, ...], ...]:
        """The claims this attempt holds (the keys of :attr:`Candidate.claim_keys`)."""
        keys: list[tuple[str | None, ...]] = []
        if self.delivery is not None:
            keys.append(("delivery", self.delivery.job_type, self.delivery.domain, self.delivery.job_id))
        if self.duplicate_key is not None:
            keys.append(("duplicate", self.job_type, self.duplicate_key))
        return tuple(keys)

    @property
    def owner(self) -> str:
        """This attempt's token in the claims it takes (made when it first claims:
        a job that claims nothing costs no random bytes)."""
        if self._owner is None:
            self._owner = uuid.uuid4().hex
        return self._owner


class DedupStore:
    """De-duplication logic, and the runner's records of attempts, over a
    :class:`~jobkit.records.store.Records`.

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
        parallel: the threads that send a batch's claims together and settle in
            the background (default: a pool of its own, made on first use).
    """

    def __init__(
        self,
        backend: Records,
        *,
        clock: Clock | None = None,
        root_cache_ttl_s: float = 15.0,
        root_cache_size: int = 10_000,
        max_defer_s: int = 10,
        parallel: Parallel | None = None,
    ) -> None:
        self.backend = backend
        self._clock = clock or SystemClock()
        self._root_cache_ttl_s = root_cache_ttl_s
        self._root_cache_size = root_cache_size
        self._max_defer_s = max_defer_s
        self._roots: OrderedDict[tuple[str, str | None, str], tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._parallel = parallel or Parallel()
        self._settling: dict[tuple[str | None, ...], Future[bool]] = {}

    @property
    def parallel(self) -> Parallel:
        """The threads this store sends requests from; other stages that talk to
        the jobs table share them (and so the client's connection pool)."""
        return self._parallel

    # -- roots --------------------------------------------------------------------

    def record_root(self, spec: JobSpecification) -> None:
        """Record a root job's timestamp (MediaWiki's deduplicateRootJob).

        Raises:
            SpecError: the spec has no root-job params, or its timestamp is ahead
                of this clock by more than the allowed skew (it would supersede
                every real edit until it expires).
            DedupUnavailable: the store could not be written.
        """
        spec.check_root_job_params()
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        if signature is None or timestamp is None:
            raise SpecError(f"{spec.type} {spec.id}: has no rootJobSignature/rootJobTimestamp params")
        if timestamp > self._clock.now() + MAX_CLOCK_SKEW_S:
            spec.check_times(self._clock.now())  # raises, naming the field and the skew
        self._advance_root(spec.type, spec.domain, signature, timestamp)

    def _advance_root(self, job_type: str, domain: str | None, signature: str, timestamp: float) -> float:
        newest = self.backend.advance_root(job_type, domain, signature, timestamp, self._expiry(ROOT_RECORD_TTL_S))
        if newest <= self._clock.now() + MAX_CLOCK_SKEW_S:  # see _superseded: never cache a record from the future
            self._remember_root((job_type, domain, signature), newest)
        return newest

    def _cached_root_verdict(self, spec: JobSpecification) -> Verdict | None:
        """SUPERSEDED or RUN from the container's cache, or None: ask the table."""
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        assert timestamp is not None and signature is not None
        with self._lock:
            cached = self._roots.get((spec.type, spec.domain, signature))
        if cached is None:
            return None
        newest, confirmed_at = cached
        if timestamp < newest:
            return Verdict.SUPERSEDED
        if timestamp == newest and self._clock.now() - confirmed_at < self._root_cache_ttl_s:
            return Verdict.RUN
        return None

    def _remember_root(self, key: tuple[str, str | None, str], newest: float) -> None:
        now = self._clock.now()
        with self._lock:
            previous = self._roots.get(key)
            if previous is None or newest >= previous[0]:
                self._roots[key] = (newest, now)
            self._roots.move_to_end(key)
            while len(self._roots) > self._root_cache_size:
                self._roots.popitem(last=False)

    # -- admission ------------------------------------------------------------------

    def admit_batch(self, candidates: Sequence[Candidate]) -> list[Admission | Exception | None]:
        """Claim a batch's jobs at once (:meth:`claim`): their claims go out together.
        A job that comes back ``root_pending`` confirms its root on its turn.

        A job that shares a claim key (:attr:`Candidate.claim_keys`) with an
        earlier job of the batch, even through a third one, gets ``None``:
        admit it with :meth:`admit` on its turn, once the earlier one has run,
        as a batch admitted one job at a time would. Never raises for store
        errors (it fails open); any other exception is answered for its own
        job only, so one job's bug does not fail its batch.
        """
        answers: list[Admission | Exception | None] = [None] * len(candidates)
        seen: set[tuple[str | None, ...]] = set()
        leads: list[int] = []
        for index, candidate in enumerate(candidates):
            keys = candidate.claim_keys
            if not keys:
                answers[index] = self._claim_or_error(candidate)  # nothing to claim: no request
                continue
            if seen.isdisjoint(keys):
                leads.append(index)
            seen.update(keys)  # a job left for its turn holds back the later jobs it shares a key with
        admissions = self._parallel.map(self._claim_or_error, [candidates[index] for index in leads])
        for index, admission in zip(leads, admissions, strict=True):
            answers[index] = admission
        return answers

    def _claim_or_error(self, candidate: Candidate) -> Admission | Exception:
        try:
            return self.claim(candidate)
        except Exception as exc:  # a bug, or a job's own hash that cannot be stored: this job's alone
            return exc

    def admit(self, candidate: Candidate) -> Admission:
        """Decide whether a job runs now: :meth:`claim`, then :meth:`confirm_root`.
        Never raises for store errors: it fails open.

        The order matters. A root job that is a duplicate of a run that already
        pushed its leaves must not advance the root first: its newer timestamp
        would supersede those leaves, and neither run's work would happen. So
        claims come first, the root is advanced only by a job that will run,
        and a job that the root then supersedes gives its claims back.
        """
        admission = self.claim(candidate)
        return self.confirm_root(candidate, admission) if admission.root_pending else admission

    def claim(self, candidate: Candidate) -> Admission:
        """The job's claims (and the root cache's answer). A job with root
        params that the cache cannot confirm comes back ``root_pending``: pass
        it to :meth:`confirm_root` just before the job runs, never earlier, so
        that only a job about to run advances its root.

        A claim of this process that is still being settled in the background
        on one of the job's keys is waited for first.
        """
        spec = candidate.spec
        admission = Admission(Verdict.RUN, job_type=spec.type)
        self._wait_for_settles(candidate.claim_keys)
        try:
            if spec.has_root_job_params():
                cached = self._cached_root_verdict(spec)
                if cached is Verdict.SUPERSEDED:
                    if not candidate.owes_run:
                        return Admission(Verdict.SUPERSEDED, SUPERSEDED_REASON)
                    self._runs_although_superseded(spec)
                admission.root_pending = cached is None
            if candidate.deliver_once:
                skip = self._claim_delivery(candidate, admission)
                if skip is not None:
                    return skip
            if candidate.ignore_duplicates and candidate.dedup_hash is not None:
                skip = self._claim_duplicate(candidate, admission)
                if skip is not None:
                    duplicate = skip.verdict is Verdict.DUPLICATE
                    self._settle_delivery_claim(admission, succeeded=duplicate, duplicate=duplicate)
                    return skip
        except DedupUnavailable as exc:
            self._fail_open(spec, exc, admission)
        return admission

    def confirm_root(self, candidate: Candidate, admission: Admission) -> Admission:
        """Advance the job's root, now that it is about to run; a job that a newer
        root supersedes gives its claims back. Never raises for store errors."""
        spec = candidate.spec
        admission.root_pending = False
        try:
            cached = self._cached_root_verdict(spec)  # a job run since the claim may have told the cache
            if cached is Verdict.RUN:
                return admission
            if cached is Verdict.SUPERSEDED or self._superseded(spec):
                if candidate.owes_run:
                    self._runs_although_superseded(spec)
                    return admission
                self._give_back(admission)
                return Admission(Verdict.SUPERSEDED, SUPERSEDED_REASON)
        except DedupUnavailable as exc:
            self._fail_open(spec, exc, admission)
        return admission

    @staticmethod
    def _fail_open(spec: JobSpecification, exc: DedupUnavailable, admission: Admission) -> None:
        log.warning(
            "dedup store unavailable, running %s %s anyway (fail-open): %s",
            spec.type,
            spec.id,
            exc,
            extra={"job_id": spec.id, "job_type": spec.type, "domain": spec.domain},
        )
        admission.unavailable = True
        admission.root_pending = False

    @staticmethod
    def _runs_although_superseded(spec: JobSpecification) -> None:
        log.info(
            "%s %s runs although a newer root was recorded while it waited: it owns its debounce window's run",
            spec.type,
            spec.id,
            extra={"job_id": spec.id, "job_type": spec.type, "domain": spec.domain},
        )

    def already_delivered(self, spec: JobSpecification) -> Admission | None:
        """For a ``deliver_once`` job: the skip its delivery claim would give it
        because its job ID already ran (or was skipped as a duplicate), without
        claiming (a read). For a stage that must not let such a job take
        anything that makes other jobs skip (a debounce window).

        Raises:
            DedupUnavailable: the table could not be read.
        """
        ended = self.backend.delivery_ended(JobRef(spec.type, spec.domain, spec.id))
        if ended is None:
            return None
        if ended.duplicate:
            return Admission(Verdict.DUPLICATE, DUPLICATE_REASON)
        return Admission(Verdict.REDELIVERED, "this job ID already ran to success")

    def superseded(self, spec: JobSpecification) -> bool:
        """Whether a newer root than the job's own is recorded, without recording
        the job's (a read, answered from the container's cache when it can):
        for a stage that must not let a superseded job take anything that
        makes other jobs skip (a debounce window), before the job is admitted.

        Raises:
            DedupUnavailable: the table could not be read.
        """
        if not spec.has_root_job_params():
            return False
        cached = self._cached_root_verdict(spec)
        if cached is not None:
            return cached is Verdict.SUPERSEDED
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        assert timestamp is not None and signature is not None
        newest = self.backend.newest_root(spec.type, spec.domain, signature)
        if newest is None or newest > self._clock.now() + MAX_CLOCK_SKEW_S:  # none, or one no clock made
            return False
        self._remember_root((spec.type, spec.domain, signature), newest)
        return timestamp < newest

    def _superseded(self, spec: JobSpecification) -> bool:
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        assert timestamp is not None and signature is not None
        newest = self._advance_root(spec.type, spec.domain, signature, timestamp)
        if newest > self._clock.now() + MAX_CLOCK_SKEW_S:
            # A record no clock could have made (a producer that wrote milliseconds):
            # it would supersede every real root for 28 days. Run the job instead.
            log.warning(
                "root record of %s %s is %.0f s ahead of this clock: ignored, the job runs",
                spec.type,
                signature,
                newest - self._clock.now(),
                extra={"job_id": spec.id, "job_type": spec.type, "domain": spec.domain},
            )
            return False
        return timestamp < newest

    def _give_back(self, admission: Admission) -> None:
        """Release the claims of a job that will not run after all (best effort:
        a claim that cannot be released lapses with its lease)."""
        try:
            self.finish(admission, succeeded=False, started_at=self._clock.now())
        finally:
            admission.duplicate_key = admission.delivery = None

    def _claim_delivery(self, candidate: Candidate, admission: Admission) -> Admission | None:
        spec = candidate.spec
        ref = JobRef(spec.type, spec.domain, spec.id)
        now = self._clock.now()
        claim = self.backend.claim_delivery(
            ref, admission.owner, now, candidate.lease_until, self._expiry(DELIVERY_RECORD_TTL_S)
        )
        if claim.won:
            admission.delivery = ref
            return None
        if claim.done and claim.duplicate:  # a redelivery of a job skipped as a duplicate is one still
            return Admission(Verdict.DUPLICATE, DUPLICATE_REASON)
        if claim.done:
            return Admission(Verdict.REDELIVERED, "this job ID already ran to success")
        return Admission(Verdict.DEFER, "this job ID is running elsewhere", self._defer_s(claim, now))

    def _claim_duplicate(self, candidate: Candidate, admission: Admission) -> Admission | None:
        spec = candidate.spec
        assert candidate.dedup_hash is not None and spec.enqueued_at is not None
        key = candidate.dedup_hash
        now = self._clock.now()
        claim = self.backend.claim_duplicate(
            spec.type,
            key,
            admission.owner,
            now,
            candidate.lease_until,
            spec.enqueued_at,
            self._expiry(DUPLICATE_RECORD_TTL_S),
        )
        if claim.won:
            admission.duplicate_key = key
            return None
        if claim.last_success_start is not None and claim.last_success_start > spec.enqueued_at:
            return Admission(Verdict.DUPLICATE, DUPLICATE_REASON)
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
                    admission.job_type,
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

    def settle_in_background(self, admission: Admission, *, succeeded: bool, started_at: float) -> Future[bool]:
        """:meth:`finish`, in the background: the runner goes on with the next job
        while the request is out. A later :meth:`admit` of a job with one of
        these claim keys waits for it."""
        future = self._parallel.submit(self.finish, admission, succeeded=succeeded, started_at=started_at)
        keys = admission.claim_keys
        with self._lock:
            for key in keys:
                self._settling[key] = future
        future.add_done_callback(lambda done: self._forget_settle(keys, done))
        return future

    def _forget_settle(self, keys: tuple[tuple[str | None, ...], ...], done: Future[bool]) -> None:
        with self._lock:
            for key in keys:
                if self._settling.get(key) is done:
                    del self._settling[key]

    def _wait_for_settles(self, keys: tuple[tuple[str | None, ...], ...]) -> None:
        with self._lock:
            pending = {self._settling[key] for key in keys if key in self._settling}
        for future in pending:
            future.exception()  # waits; what it raised is the settler's to report

    def _settle_delivery_claim(self, admission: Admission, *, succeeded: bool, duplicate: bool = False) -> None:
        if admission.delivery is not None:
            expires_at = self._expiry(DELIVERY_RECORD_TTL_S)
            self.backend.finish_delivery(
                admission.delivery, admission.owner, succeeded, expires_at, duplicate=duplicate
            )

    # -- records of attempts ---------------------------------------------------------------

    def record_failure(self, record: FailureRecord) -> bool:
        """Write a failure record (kept 14 days). Returns False if the store was unavailable."""
        try:
            self.backend.put_failure(record, self._expiry(FAILURE_RECORD_TTL_S))
        except DedupUnavailable as exc:
            log.warning("could not write the failure record of %s: %s", record.job_id, exc)
            return False
        return True

    def record_final(self, record: FinalAttempt) -> bool:
        """Write (or overwrite) a job's final-attempt record. Returns False if the store was unavailable."""
        try:
            self.backend.put_final(record, self._expiry(FINAL_RECORD_TTL_S))
        except DedupUnavailable as exc:
            log.warning("could not record the final attempt of %s: %s", record.ref.job_id, exc)
            return False
        return True

    def runs(self, ref: JobRef, limit: int = 20) -> JobRuns:
        """A job's failure records (newest first) and final attempt.

        Raises:
            DedupUnavailable: the table could not be read.
        """
        return self.backend.runs(ref.job_type, ref.job_id, limit, ref.domain).get(ref.domain, JobRuns())

    def failures(self, ref: JobRef, limit: int = 20) -> list[FailureRecord]:
        """A job's failure records, newest first."""
        return list(self.runs(ref, limit).failures)

    def record_deferral(self, job_type: str, message_id: str, attempts_used: int, *, recounted: bool = False) -> bool:
        """Remember, for the re-enqueued message ``message_id``, the attempts its
        job had used (and whether they were recounted). Kept where no sender can
        write it: a message attribute or body field would let anyone forge a
        count, and would survive a redrive."""
        try:
            self.backend.put_deferral(
                job_type, message_id, attempts_used, self._expiry(DEFERRAL_RECORD_TTL_S), recounted=recounted
            )
        except DedupUnavailable as exc:
            log.warning("could not record the attempts of deferred message %s: %s", message_id, exc)
            return False
        return True

    def attempts_before(self, job_type: str, message_id: str) -> int:
        """The attempts used before the runner re-enqueued this message (0 if it
        did not, or the store cannot say: the job then gets its full attempts)."""
        return self.deferred(job_type, message_id)[0]

    def deferred(self, job_type: str, message_id: str) -> tuple[int, bool]:
        """(attempts used, whether they were recounted) before the runner
        re-enqueued this message: ``(0, False)`` if it did not, or the store
        cannot say (the job then gets its full attempts)."""
        try:
            return self.backend.deferred(job_type, message_id) or (0, False)
        except DedupUnavailable as exc:
            log.warning("could not read the attempts of deferred message %s: %s", message_id, exc)
            return 0, False

    def _expiry(self, ttl_s: int) -> int:
        return int(self._clock.now()) + ttl_s
