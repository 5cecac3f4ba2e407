"""The de-duplication store: admission over the jobs table (see :mod:`jobkit.dedup`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock, SystemClock
from jobkit.core.parallel import Parallel
from jobkit.core.spec import JobSpecification
from jobkit.dedup.roots import RootCache
from jobkit.records import DELIVERY_RECORD_TTL_S, DUPLICATE_RECORD_TTL_S, Claim, TableUnavailable
from jobkit.records.keys import JobRef

if TYPE_CHECKING:
    from concurrent.futures import Future

    from jobkit.records.store import Records

from jobkit.dedup.admission import DUPLICATE_REASON, SUPERSEDED_REASON, Admission, Candidate, Verdict

log = logging.getLogger(__name__)


class DedupStore:
    """Admission over a :class:`~jobkit.records.store.Records`: claims, the
    root check, and settling an attempt's claims.

    Args:
        records: where records live.
        clock: the time source.
        roots: the container's root cache (default: one of its own, with
            ``root_cache_ttl_s`` and ``root_cache_size``); the push group of
            the container shares it.
        max_defer_s: the longest a twin waits before it looks again.
        parallel: the threads that send a batch's claims together and settle in
            the background (default: a pool of its own, made on first use).
    """

    def __init__(
        self,
        records: Records,
        *,
        clock: Clock | None = None,
        roots: RootCache | None = None,
        root_cache_ttl_s: float = 15.0,
        root_cache_size: int = 10_000,
        max_defer_s: int = 10,
        parallel: Parallel | None = None,
    ) -> None:
        self.records = records
        self._clock = clock or SystemClock()
        self.roots = roots or RootCache(records, clock=self._clock, ttl_s=root_cache_ttl_s, size=root_cache_size)
        self._max_defer_s = max_defer_s
        self._lock = threading.Lock()
        self._parallel = parallel or Parallel()
        self._settling: dict[tuple[str | None, ...], Future[bool]] = {}

    @property
    def parallel(self) -> Parallel:
        """The threads this store sends requests from; other stages that talk to
        the jobs table share them (and so the client's connection pool)."""
        return self._parallel

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
                cached = self.roots.cached(spec)
                if cached is True:
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
        except TableUnavailable as exc:
            self._fail_open(candidate, exc, admission)
        return admission

    def confirm_root(self, candidate: Candidate, admission: Admission) -> Admission:
        """Advance the job's root, now that it is about to run; a job that a newer
        root supersedes gives its claims back. Never raises for store errors."""
        spec = candidate.spec
        admission.root_pending = False
        try:
            cached = self.roots.cached(spec)  # a job run since the claim may have told the cache
            if cached is False:
                return admission
            if cached is True or self.roots.advance(spec):
                if candidate.owes_run:
                    self._runs_although_superseded(spec)
                    return admission
                self._give_back(admission)
                return Admission(Verdict.SUPERSEDED, SUPERSEDED_REASON)
        except TableUnavailable as exc:
            self._fail_open(candidate, exc, admission)
        return admission

    @staticmethod
    def _fail_open(candidate: Candidate, exc: TableUnavailable, admission: Admission) -> None:
        spec = candidate.spec
        waits = "not running %s %s (a batch_callback type's job waits for it)"
        log.warning(
            "dedup store unavailable, "
            + (waits if candidate.waits_for_store else "running %s %s anyway (fail-open)")
            + ": %s",
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
            TableUnavailable: the table could not be read.
        """
        ended = self.records.delivery_ended(JobRef(spec.type, spec.domain, spec.id))
        if ended is None:
            return None
        if ended.duplicate:
            return Admission(Verdict.DUPLICATE, DUPLICATE_REASON)
        return Admission(Verdict.REDELIVERED, "this job ID already ran to success")

    def superseded(self, spec: JobSpecification) -> bool:
        """Whether a newer root supersedes the job, without recording its own
        (:meth:`RootCache.superseded`: a read).

        Raises:
            TableUnavailable: the table could not be read.
        """
        return self.roots.superseded(spec)

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
        claim = self.records.claim_delivery(
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
        claim = self.records.claim_duplicate(
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
                self.records.release_duplicate(
                    admission.job_type,
                    admission.duplicate_key,
                    admission.owner,
                    started_at if succeeded else None,
                    self._expiry(DUPLICATE_RECORD_TTL_S),
                )
            self._settle_delivery_claim(admission, succeeded=succeeded)
        except TableUnavailable as exc:
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
            self.records.finish_delivery(
                admission.delivery, admission.owner, succeeded, expires_at, duplicate=duplicate
            )

    def _expiry(self, ttl_s: int) -> int:
        return int(self._clock.now()) + ttl_s
