"""The record kinds of the jobs table, written over the five primitives of
:class:`~jobkit.records.table.Table`. All the conditions live here; a backend
only stores items. The key layout is :mod:`jobkit.records.keys`.

Every write that can lose is one conditional update that returns what it lost
to (the stored root timestamp, the claim holder, the last successful start),
so admission never needs a second read.
"""

from __future__ import annotations

from contextlib import suppress
from functools import cached_property
from typing import TYPE_CHECKING

from jobkit.records import (
    ANY_DOMAIN,
    Claim,
    DomainFilter,
    FailureRecord,
    FinalAttempt,
    JobRuns,
    JobStatus,
)
from jobkit.records.items import failure, final_attempt, integer, lost_claim, number
from jobkit.records.items import status as status_record
from jobkit.records.keys import (
    FINAL_SUFFIX,
    NO_SORT,
    JobRef,
    Kind,
    domain_from_key,
    domain_key,
    failure_sort_key,
    final_sort_key,
    partition_key,
    split_runs_sort_key,
)
from jobkit.records.table import Absent, AtMost, Below, ConditionFailed, Equals, Item, Key, Table

if TYPE_CHECKING:
    from jobkit.records.batches import Batches
    from jobkit.records.cancellations import Cancellations
    from jobkit.records.debounce_windows import DebounceWindows
    from jobkit.records.leases import Leases
    from jobkit.records.token_buckets import TokenBuckets


class Records:
    """The jobs table's records over one :class:`~jobkit.records.table.Table`.
    Every method may raise :class:`~jobkit.records.TableUnavailable`."""

    def __init__(self, table: Table) -> None:
        self.table = table

    # -- roots -----------------------------------------------------------------------

    def advance_root(
        self, job_type: str, domain: str | None, signature: str, timestamp: float, expires_at: int
    ) -> float:
        """Set the root's newest timestamp to ``timestamp`` if that is newer.
        Returns the newest stored timestamp after the call."""
        key = (partition_key(job_type, Kind.ROOT, signature), domain_key(domain))
        try:
            self.table.update(
                key,
                {"root_ts": timestamp, "expires_at": expires_at},
                when=Absent("root_ts") | Below("root_ts", timestamp),
            )
        except ConditionFailed as lost:
            stored = number(lost.item or {}, "root_ts")
            if stored is not None:
                return stored
        return timestamp

    def newest_root(self, job_type: str, domain: str | None, signature: str) -> float | None:
        """The root's newest recorded timestamp, or ``None`` (a read; it writes nothing)."""
        item = self.table.get((partition_key(job_type, Kind.ROOT, signature), domain_key(domain)))
        return number(item, "root_ts") if item is not None else None

    # -- duplicate claims ------------------------------------------------------------------

    def claim_duplicate(
        self, job_type: str, key: str, owner: str, now: float, lease_until: float, enqueued_at: float, expires_at: int
    ) -> Claim:
        """Claim a dedup hash, unless a live claim is held (lease_until > now)
        or a run that started after ``enqueued_at`` succeeded."""
        unclaimed = Absent("owner") | Below("lease_until", now)
        not_succeeded_since = Absent("last_success_start") | AtMost("last_success_start", enqueued_at)
        try:
            self.table.update(
                _duplicate_key(job_type, key),
                {"owner": owner, "started_at": now, "lease_until": lease_until, "expires_at": expires_at},
                when=unclaimed & not_succeeded_since,
            )
        except ConditionFailed as lost:
            return lost_claim(lost.item or {})
        return Claim(True)

    def release_duplicate(
        self, job_type: str, key: str, owner: str, success_started_at: float | None, expires_at: int
    ) -> None:
        """Release the owner's claim, recording a successful run's start if given."""
        record = _duplicate_key(job_type, key)
        succeeded: Item = (
            {} if success_started_at is None else {"last_success_start": success_started_at, "expires_at": expires_at}
        )
        try:
            self.table.update(
                record, succeeded, ("owner", "started_at", "lease_until"), Equals("owner", owner), want_old=False
            )
        except ConditionFailed:
            if success_started_at is None:
                return
            # Our lease lapsed and another run took the claim; still record that
            # this run succeeded (rare, so the second write is acceptable).
            with suppress(ConditionFailed):  # a later success is recorded already
                self.table.update(
                    record,
                    {"last_success_start": success_started_at},
                    when=Absent("last_success_start") | Below("last_success_start", success_started_at),
                    want_old=False,
                )

    # -- delivery claims -------------------------------------------------------------------

    def claim_delivery(self, ref: JobRef, owner: str, now: float, lease_until: float, expires_at: int) -> Claim:
        """Claim a job, unless it already succeeded or a live claim is held."""
        try:
            self.table.update(
                _delivery_key(ref),
                {"state": "running", "owner": owner, "lease_until": lease_until, "expires_at": expires_at},
                when=Absent("state") | (Equals("state", "running") & Below("lease_until", now)),
            )
        except ConditionFailed as lost:
            return lost_claim(lost.item or {})
        return Claim(True)

    def delivery_ended(self, ref: JobRef) -> Claim | None:
        """How the job's delivery claim ended, if it did (a read): ``None`` while
        no run of the job ID has succeeded."""
        item = self.table.get(_delivery_key(ref))
        return lost_claim(item) if item is not None and item.get("state") == "done" else None

    def finish_delivery(
        self, ref: JobRef, owner: str, succeeded: bool, expires_at: int, *, duplicate: bool = False
    ) -> None:
        """Mark the job done on success (or, with ``duplicate``, done because it was
        skipped as a duplicate of a twin's successful run: a redelivery then says
        so, not that it ran); release the owner's claim otherwise."""
        if succeeded:
            done: Item = {"state": "done", "expires_at": expires_at, "ended": "duplicate" if duplicate else "ran"}
            self.table.update(_delivery_key(ref), done, ("lease_until",))
        else:
            self.table.delete(_delivery_key(ref), Equals("owner", owner))

    # -- attempts: failures and the final attempt ------------------------------------------------

    def put_failure(self, record: FailureRecord, expires_at: int) -> None:
        self.table.put(
            (
                _runs_partition(record.job_type, record.job_id),
                failure_sort_key(record.domain, record.at, record.attempt),
            ),
            {
                "expires_at": expires_at,
                "job_type": record.job_type,
                "domain": record.domain,
                "attempt": record.attempt,
                "at": record.at,
                "error_class": record.error_class,
                "message": record.message,
                "traceback": record.traceback,
                "dead_letter_reason": record.dead_letter_reason,
                "correlation_id": record.correlation_id,
                "not_run": None if record.ran else True,
            },
        )

    def put_final(self, record: FinalAttempt, expires_at: int) -> None:
        """Store a job's final-attempt record, replacing an earlier one."""
        self.table.put(
            (_runs_partition(record.ref.job_type, record.ref.job_id), final_sort_key(record.ref.domain)),
            {
                "expires_at": expires_at,
                "attempt": record.attempt,
                "message_id": record.message_id,
                "started_at": record.started_at,
                "succeeded_at": record.succeeded_at,
                "correlation_id": record.correlation_id,
            },
        )

    def runs(
        self, job_type: str, job_id: str, limit: int, domain: DomainFilter = ANY_DOMAIN
    ) -> dict[str | None, JobRuns]:
        """The attempt records of a job ID of a type, by domain (a caller may
        reuse an ID in several), or of one domain only; failures newest first,
        at most ``limit`` of them."""
        # A domain may hold "#", so the prefix can match another domain's keys too: they are read and skipped
        prefix = None if domain is ANY_DOMAIN else domain_key(domain) + "#"
        failures: dict[str | None, list[FailureRecord]] = {}
        finals: dict[str | None, FinalAttempt] = {}
        for sort_key, item in self.table.query(_runs_partition(job_type, job_id), prefix, newest_first=True):
            found, rest = split_runs_sort_key(sort_key)
            if domain is not ANY_DOMAIN and found != domain:
                continue
            ref = JobRef(job_type, found, job_id)
            if rest == FINAL_SUFFIX:
                finals[found] = final_attempt(item, ref)
            elif len(failures.setdefault(found, [])) < limit:
                failures[found].append(failure(item, ref))
            if domain is not ANY_DOMAIN and len(failures.get(domain, ())) >= limit:
                break  # the final record sorts before the failures: it is read already
        return {found: JobRuns(tuple(failures.get(found, ())), finals.get(found)) for found in {*failures, *finals}}

    # -- deferrals ----------------------------------------------------------------------------

    def put_deferral(
        self, job_type: str, message_id: str, attempts_used: int, expires_at: int, *, recounted: bool = False
    ) -> None:
        values: Item = {"expires_at": expires_at, "attempts_used": attempts_used}
        if recounted:
            values = {**values, "recounted": True}
        self.table.put(_deferral_key(job_type, message_id), values)

    def deferral(self, job_type: str, message_id: str) -> int | None:
        """The attempts a re-enqueued message's job had used, if the runner recorded them."""
        found = self.deferred(job_type, message_id)
        return None if found is None else found[0]

    def deferred(self, job_type: str, message_id: str) -> tuple[int, bool] | None:
        """(attempts used, whether its attempts were recounted) of a re-enqueued
        message, if the runner recorded them."""
        item = self.table.get(_deferral_key(job_type, message_id))
        if item is None:
            return None
        return integer(item, "attempts_used") or 0, item.get("recounted") is True

    # -- status records -------------------------------------------------------------------------

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        """Store a job's status record, replacing the previous one. A whole-item
        put: the tracker holds the attempt's full state, so every write is one
        request and no write depends on an earlier one."""
        self.table.put(
            (partition_key(status.job_type, Kind.STATUS, status.job_id), domain_key(status.domain)),
            {
                "expires_at": expires_at,
                "job_type": status.job_type,
                "domain": status.domain,
                "state": str(status.state),
                "attempt": status.attempt,
                "updated_at": status.updated_at,
                "started_at": status.started_at,
                "finished_at": status.finished_at,
                "progress": status.progress,
                "result": status.result,
                "error": status.error,
                "will_retry": status.will_retry,
                "note": status.note,
                "correlation_id": status.correlation_id,
                "enqueued_at": status.enqueued_at,
            },
        )

    def statuses(self, job_type: str, job_id: str) -> list[JobStatus]:
        """The status records of a job ID of a type, one per domain it was used in."""
        partition = partition_key(job_type, Kind.STATUS, job_id)
        return [
            status_record(JobRef(job_type, domain_from_key(k), job_id), i)
            for k, i in self.table.query(partition, consistent=True)
        ]

    def status_of(self, ref: JobRef) -> JobStatus | None:
        """One job's status record, in its domain (one item read)."""
        item = self.table.get((partition_key(ref.job_type, Kind.STATUS, ref.job_id), domain_key(ref.domain)))
        return status_record(ref, item) if item is not None else None

    # -- flow control: a kind a module, made on first use (a runner whose types declare none never imports them)

    @cached_property
    def leases(self) -> Leases:
        """Concurrency leases (:mod:`jobkit.records.leases`)."""
        from jobkit.records.leases import Leases

        return Leases(self.table)

    @cached_property
    def token_buckets(self) -> TokenBuckets:
        """Rate limits' token buckets (:mod:`jobkit.records.token_buckets`)."""
        from jobkit.records.token_buckets import TokenBuckets

        return TokenBuckets(self.table)

    @cached_property
    def debounce_windows(self) -> DebounceWindows:
        """Debounce windows (:mod:`jobkit.records.debounce_windows`)."""
        from jobkit.records.debounce_windows import DebounceWindows

        return DebounceWindows(self.table)

    @cached_property
    def cancellations(self) -> Cancellations:
        """Cancellations (:mod:`jobkit.records.cancellations`)."""
        from jobkit.records.cancellations import Cancellations

        return Cancellations(self.table)

    @cached_property
    def batches(self) -> Batches:
        """Batches (:mod:`jobkit.records.batches`)."""
        from jobkit.records.batches import Batches

        return Batches(self.table)

    # -- removal ---------------------------------------------------------------------------
    def delete_job_records(self, job_type: str, job_id: str, *, dedup_hash: str | None = None) -> None:
        """Delete a job ID's status and run (failure, final attempt) records in
        every domain and, given its hash, its duplicate claim: what ``jobkit
        verify`` leaves of a canary. Never used on a user's job, whose records
        expire by their TTL."""
        partitions = [partition_key(job_type, kind, job_id) for kind in (Kind.STATUS, Kind.RUNS)]
        if dedup_hash is not None:
            partitions.append(partition_key(job_type, Kind.DUPLICATE, dedup_hash))
        for partition in partitions:
            for sort_key, _ in list(self.table.query(partition)):
                self.table.delete((partition, sort_key))


def _duplicate_key(job_type: str, key: str) -> Key:
    return (partition_key(job_type, Kind.DUPLICATE, key), NO_SORT)


def _delivery_key(ref: JobRef) -> Key:
    return (partition_key(ref.job_type, Kind.DELIVERY, ref.job_id), domain_key(ref.domain))


def _runs_partition(job_type: str, job_id: str) -> str:
    return partition_key(job_type, Kind.RUNS, job_id)


def _deferral_key(job_type: str, message_id: str) -> Key:
    return (partition_key(job_type, Kind.DEFERRAL, message_id), NO_SORT)
