"""An in-memory :class:`~jobkit.dedup.DedupBackend`, for unit tests.

It applies exactly the conditions the DynamoDB backend writes as condition
expressions; the shared backend contract tests run against both.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from jobkit.dedup import Claim, FailureRecord
from jobkit.status import JobStatus


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


class MemoryDedupBackend:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.roots: dict[str, float] = {}
        self.duplicates: dict[str, _Duplicate] = {}
        self.deliveries: dict[str, _Delivery] = {}
        self._failures: dict[str, list[FailureRecord]] = {}
        self.statuses: dict[str, JobStatus] = {}
        self.requests = 0  # every method call is one request, as on DynamoDB

    def advance_root(self, key: str, timestamp: float, expires_at: int) -> float:
        with self._lock:
            self.requests += 1
            stored = self.roots.get(key)
            if stored is None or stored < timestamp:
                self.roots[key] = timestamp
                return timestamp
            return stored

    def claim_duplicate(
        self, key: str, owner: str, now: float, lease_until: float, enqueued_at: float, expires_at: int
    ) -> Claim:
        with self._lock:
            self.requests += 1
            record = self.duplicates.setdefault(key, _Duplicate())
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

    def release_duplicate(self, key: str, owner: str, success_started_at: float | None, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            record = self.duplicates.get(key)
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

    def claim_delivery(self, job_id: str, owner: str, now: float, lease_until: float, expires_at: int) -> Claim:
        with self._lock:
            self.requests += 1
            record = self.deliveries.get(job_id)
            if record is None or (
                record.state == "running" and record.lease_until is not None and record.lease_until < now
            ):
                self.deliveries[job_id] = _Delivery(owner, "running", lease_until)
                return Claim(True)
            return Claim(False, holder=record.owner, lease_until=record.lease_until, done=record.state == "done")

    def finish_delivery(self, job_id: str, owner: str, succeeded: bool, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            record = self.deliveries.get(job_id)
            if succeeded:
                self.deliveries[job_id] = _Delivery(owner, "done", None)
            elif record is not None and record.owner == owner:
                del self.deliveries[job_id]

    def put_failure(self, record: FailureRecord, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            self._failures.setdefault(record.job_id, []).append(record)

    def failures(self, job_id: str, limit: int) -> list[FailureRecord]:
        with self._lock:
            self.requests += 1
            records = sorted(self._failures.get(job_id, []), key=lambda r: (r.at, r.attempt), reverse=True)
            return records[:limit]

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        with self._lock:
            self.requests += 1
            self.statuses[status.job_id] = status

    def status(self, job_id: str) -> JobStatus | None:
        with self._lock:
            self.requests += 1
            return self.statuses.get(job_id)
