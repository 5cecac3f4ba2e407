"""An in-memory :class:`~jobkit.records.RecordsBackend`, for unit tests.

It applies exactly the conditions the DynamoDB backend writes as condition
expressions, scoped by the same keys; the shared backend contract tests run
against both.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from jobkit.records import ANY_DOMAIN, Claim, DomainFilter, FailureRecord, FinalAttempt, JobRuns, JobStatus
from jobkit.records.keys import JobRef


@dataclass
class _Duplicate:
    owner: str | None = None
    started_at: float | None = None
    lease_until: float | None = None
    last_success_start: float | None = None


@dataclass
class _Delivery:
    owner: str
    state: str  # "running" or "done"
    lease_until: float | None


class MemoryRecords:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.roots: dict[tuple[str, str | None, str], float] = {}
        self.duplicates: dict[tuple[str, str], _Duplicate] = {}
        self.deliveries: dict[JobRef, _Delivery] = {}
        self._failures: dict[JobRef, list[FailureRecord]] = {}
        self._finals: dict[JobRef, FinalAttempt] = {}
        self._deferrals: dict[tuple[str, str], int] = {}
        self.statuses_by_ref: dict[JobRef, JobStatus] = {}
        self.requests = 0  # every method call is one request, as on DynamoDB

    def advance_root(
        self, job_type: str, domain: str | None, signature: str, timestamp: float, expires_at: int
    ) -> float:
        with self._lock:
            self.requests += 1
            key = (job_type, domain, signature)
            stored = self.roots.get(key)
            if stored is None or stored < timestamp:
                self.roots[key] = timestamp
                return timestamp
            return stored

    def claim_duplicate(
        self, job_type: str, key: str, owner: str, now: float, lease_until: float, enqueued_at: float, expires_at: int
    ) -> Claim:
        with self._lock:
            self.requests += 1
            record = self.duplicates.setdefault((job_type, key), _Duplicate())
            unclaimed = record.owner is None or (record.lease_until is not None and record.lease_until < now)
            not_succeeded_since = record.last_success_start is None or record.last_success_start <= enqueued_at
            if unclaimed and not_succeeded_since:
                record.owner, record.started_at, record.lease_until = owner, now, lease_until
                return Claim(True)
            return Claim(
                False,
                holder=record.owner,
                lease_until=record.lease_until,
                last_success_start=record.last_success_start,
            )

    def release_duplicate(
        self, job_type: str, key: str, owner: str, success_started_at: float | None, expires_at: int
    ) -> None:
        with self._lock:
            self.requests += 1
            record = self.duplicates.get((job_type, key))
            if record is None:
                return
            if record.owner == owner:
                record.owner = record.started_at = record.lease_until = None
                if success_started_at is not None:
                    record.last_success_start = success_started_at
            elif success_started_at is not None and (
                record.last_success_start is None or record.last_success_start < success_started_at
            ):
                self.requests += 1  # the lease was lost: a second, rare write records the success
                record.last_success_start = success_started_at

    def claim_delivery(self, ref: JobRef, owner: str, now: float, lease_until: float, expires_at: int) -> Claim:
        with self._lock:
            self.requests += 1
            record = self.deliveries.get(ref)
            if record is None or (
                record.state == "running" and record.lease_until is not None and record.lease_until < now
            ):
                self.deliveries[ref] = _Delivery(owner, "running", lease_until)
                return Claim(True)
            return Claim(False, holder=record.owner, lease_until=record.lease_until, done=record.state == "done")

    def finish_delivery(self, ref: JobRef, owner: str, succeeded: bool, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            record = self.deliveries.get(ref)
            if succeeded:
                self.deliveries[ref] = _Delivery(owner, "done", None)
            elif record is not None and record.owner == owner:
                del self.deliveries[ref]

    def put_failure(self, record: FailureRecord, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            self._failures.setdefault(record.ref, []).append(record)

    def put_final(self, record: FinalAttempt, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            self._finals[record.ref] = record

    def runs(
        self, job_type: str, job_id: str, limit: int, domain: DomainFilter = ANY_DOMAIN
    ) -> dict[str | None, JobRuns]:
        with self._lock:
            self.requests += 1
            refs = {
                r
                for r in (*self._failures, *self._finals)
                if (r.job_type, r.job_id) == (job_type, job_id) and (domain is ANY_DOMAIN or r.domain == domain)
            }
            found = {}
            for ref in refs:
                failures = sorted(self._failures.get(ref, []), key=lambda r: (r.at, r.attempt), reverse=True)
                found[ref.domain] = JobRuns(tuple(failures[:limit]), self._finals.get(ref))
            return found

    def put_deferral(self, job_type: str, message_id: str, attempts_used: int, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            self._deferrals[(job_type, message_id)] = attempts_used

    def deferral(self, job_type: str, message_id: str) -> int | None:
        with self._lock:
            self.requests += 1
            return self._deferrals.get((job_type, message_id))

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            self.statuses_by_ref[status.ref] = status

    def statuses(self, job_type: str, job_id: str) -> list[JobStatus]:
        with self._lock:
            self.requests += 1
            return [s for ref, s in self.statuses_by_ref.items() if (ref.job_type, ref.job_id) == (job_type, job_id)]
