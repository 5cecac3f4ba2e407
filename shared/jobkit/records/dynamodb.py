"""The DynamoDB :class:`~jobkit.records.RecordsBackend`: one table, modelled with pynamodb.

Keys are ``pk`` / ``sk`` and ``expires_at`` is the TTL attribute; the key
layout, type first so IAM can scope each runner to its own types' records, is
:mod:`jobkit.records.keys`.

Why the calls go through a boto3 client and not through ``Model.save()`` /
``Model.update()``: a losing conditional write must say what it lost to
(the stored root timestamp, the claim holder, the last successful start) in the
same request. DynamoDB does that with ``ReturnValuesOnConditionCheckFailure=
ALL_OLD``, which pynamodb 6.1 exposes only on transactions, and a transaction
costs twice the write units. So the request is built by the model's own
serialisation (``get_update_kwargs_from_instance``) and sent with the table's
boto3 client, and the returned item is read back with ``from_raw_data``.
"""

from __future__ import annotations

from typing import Any

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from jobkit.records import (
    ANY_DOMAIN,
    Claim,
    DedupUnavailable,
    DomainFilter,
    FailureRecord,
    FinalAttempt,
    JobRuns,
    JobState,
    JobStatus,
)
from jobkit.records.dynamodb_items import (
    DeferralItem,
    DeliveryRecord,
    DuplicateRecord,
    FailureItem,
    FinalItem,
    RootRecord,
    StatusItem,
    _Record,
)
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


class DynamoDBRecords:
    """Records in one DynamoDB table.

    Args:
        client: a boto3 DynamoDB client (injected; create it once per container).
        table_name: the deployed table (``Declaration.table_name``).
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table_name = table_name

    # -- roots -----------------------------------------------------------------------

    def advance_root(
        self, job_type: str, domain: str | None, signature: str, timestamp: float, expires_at: int
    ) -> float:
        record = RootRecord(partition_key(job_type, Kind.ROOT, signature), domain_key(domain))
        won, old = self._update(
            record,
            [RootRecord.root_ts.set(timestamp), RootRecord.expires_at.set(expires_at)],
            RootRecord.root_ts.does_not_exist() | (RootRecord.root_ts < timestamp),
        )
        if won or old is None:
            return timestamp
        return float(RootRecord.from_raw_data(old).root_ts)

    # -- duplicate claims ------------------------------------------------------------------

    def claim_duplicate(
        self, job_type: str, key: str, owner: str, now: float, lease_until: float, enqueued_at: float, expires_at: int
    ) -> Claim:
        d = DuplicateRecord
        unclaimed = d.owner.does_not_exist() | (d.lease_until < now)
        not_succeeded_since = d.last_success_start.does_not_exist() | (d.last_success_start <= enqueued_at)
        won, old = self._update(
            d(partition_key(job_type, Kind.DUPLICATE, key), NO_SORT),
            [d.owner.set(owner), d.started_at.set(now), d.lease_until.set(lease_until), d.expires_at.set(expires_at)],
            unclaimed & not_succeeded_since,
        )
        if won or old is None:
            return Claim(True)
        stored = d.from_raw_data(old)
        return Claim(
            False,
            holder=stored.owner,
            lease_until=_float(stored.lease_until),
            last_success_start=_float(stored.last_success_start),
        )

    def release_duplicate(
        self, job_type: str, key: str, owner: str, success_started_at: float | None, expires_at: int
    ) -> None:
        d = DuplicateRecord
        record = d(partition_key(job_type, Kind.DUPLICATE, key), NO_SORT)
        actions: list[Action] = [d.owner.remove(), d.started_at.remove(), d.lease_until.remove()]
        if success_started_at is not None:
            actions += [d.last_success_start.set(success_started_at), d.expires_at.set(expires_at)]
        won, _ = self._update(record, actions, d.owner == owner, return_old=False)
        if not won and success_started_at is not None:
            # Our lease lapsed and another run took the claim; still record that
            # this run succeeded (rare, so the second write is acceptable).
            self._update(
                record,
                [d.last_success_start.set(success_started_at)],
                d.last_success_start.does_not_exist() | (d.last_success_start < success_started_at),
                return_old=False,
            )

    # -- delivery claims -------------------------------------------------------------------

    def claim_delivery(self, ref: JobRef, owner: str, now: float, lease_until: float, expires_at: int) -> Claim:
        d = DeliveryRecord
        won, old = self._update(
            d(partition_key(ref.job_type, Kind.DELIVERY, ref.job_id), domain_key(ref.domain)),
            [d.state.set("running"), d.owner.set(owner), d.lease_until.set(lease_until), d.expires_at.set(expires_at)],
            d.state.does_not_exist() | ((d.state == "running") & (d.lease_until < now)),
        )
        if won or old is None:
            return Claim(True)
        stored = d.from_raw_data(old)
        return Claim(False, holder=stored.owner, lease_until=_float(stored.lease_until), done=stored.state == "done")

    def finish_delivery(self, ref: JobRef, owner: str, succeeded: bool, expires_at: int) -> None:
        d = DeliveryRecord
        record = d(partition_key(ref.job_type, Kind.DELIVERY, ref.job_id), domain_key(ref.domain))
        if succeeded:
            self._update(
                record,
                [d.state.set("done"), d.lease_until.remove(), d.expires_at.set(expires_at)],
                None,
                return_old=False,
            )
            return
        kwargs = record.get_delete_kwargs_from_instance(d.owner == owner)
        self._call("delete_item", kwargs)

    # -- attempts: failures and the final attempt ------------------------------------------------

    def put_failure(self, record: FailureRecord, expires_at: int) -> None:
        item = FailureItem(
            partition_key(record.job_type, Kind.RUNS, record.job_id),
            failure_sort_key(record.domain, record.at, record.attempt),
            expires_at=expires_at,
            job_type=record.job_type,
            domain=record.domain,
            attempt=record.attempt,
            at=record.at,
            error_class=record.error_class,
            message=record.message,
            traceback=record.traceback,
            dead_letter_reason=record.dead_letter_reason,
        )
        self._call("put_item", item.get_save_kwargs_from_instance())

    def put_final(self, record: FinalAttempt, expires_at: int) -> None:
        ref = record.ref
        item = FinalItem(
            partition_key(ref.job_type, Kind.RUNS, ref.job_id),
            final_sort_key(ref.domain),
            expires_at=expires_at,
            attempt=record.attempt,
            message_id=record.message_id,
            started_at=record.started_at,
            succeeded_at=record.succeeded_at,
        )
        self._call("put_item", item.get_save_kwargs_from_instance())

    def runs(
        self, job_type: str, job_id: str, limit: int, domain: DomainFilter = ANY_DOMAIN
    ) -> dict[str | None, JobRuns]:
        pk = partition_key(job_type, Kind.RUNS, job_id)
        condition, values = "pk = :pk", {":pk": {"S": pk}}
        if domain is not ANY_DOMAIN:
            # A domain may hold "#", so this prefix can match another domain's keys too: they are read and skipped
            condition += " AND begins_with(sk, :domain)"
            values[":domain"] = {"S": domain_key(domain) + "#"}
        request: dict[str, Any] = {
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
        }
        failures: dict[str | None, list[FailureRecord]] = {}
        finals: dict[str | None, FinalAttempt] = {}
        while True:
            response = self._call("query", dict(request))
            for raw in response.get("Items", []):
                found, rest = split_runs_sort_key(raw["sk"]["S"])
                if domain is not ANY_DOMAIN and found != domain:
                    continue
                if rest == FINAL_SUFFIX:
                    finals[found] = _final_attempt(raw, JobRef(job_type, found, job_id))
                else:
                    failures.setdefault(found, []).append(_failure(raw, job_type, found, job_id))
            last = response.get("LastEvaluatedKey")
            if last is None or sum(len(f) for f in failures.values()) >= limit:
                break
            request["ExclusiveStartKey"] = last
        return {
            found: JobRuns(tuple(failures.get(found, ())[:limit]), finals.get(found)) for found in {*failures, *finals}
        }

    # -- deferrals ----------------------------------------------------------------------------

    def put_deferral(self, job_type: str, message_id: str, attempts_used: int, expires_at: int) -> None:
        item = DeferralItem(
            partition_key(job_type, Kind.DEFERRAL, message_id),
            NO_SORT,
            expires_at=expires_at,
            attempts_used=attempts_used,
        )
        self._call("put_item", item.get_save_kwargs_from_instance())

    def deferral(self, job_type: str, message_id: str) -> int | None:
        response = self._call(
            "get_item",
            {
                "Key": {"pk": {"S": partition_key(job_type, Kind.DEFERRAL, message_id)}, "sk": {"S": NO_SORT}},
                "ConsistentRead": True,
            },
        )
        raw = response.get("Item")
        return int(DeferralItem.from_raw_data(raw).attempts_used) if raw else None

    # -- status records -------------------------------------------------------------------------

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        # A whole-item PutItem: the tracker holds the attempt's full state, so
        # every write is one request and no write depends on an earlier one.
        item = StatusItem(
            partition_key(status.job_type, Kind.STATUS, status.job_id),
            domain_key(status.domain),
            expires_at=expires_at,
            job_type=status.job_type,
            domain=status.domain,
            state=str(status.state),
            attempt=status.attempt,
            updated_at=status.updated_at,
            started_at=status.started_at,
            finished_at=status.finished_at,
            progress=status.progress,
            result=status.result,
            error=status.error,
            will_retry=status.will_retry,
            note=status.note,
        )
        self._call("put_item", item.get_save_kwargs_from_instance())

    def statuses(self, job_type: str, job_id: str) -> list[JobStatus]:
        response = self._call(
            "query",
            {
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": partition_key(job_type, Kind.STATUS, job_id)}},
                "ConsistentRead": True,
            },
        )
        statuses = []
        for raw in response.get("Items", []):
            item = StatusItem.from_raw_data(raw)
            statuses.append(
                JobStatus(
                    job_id=job_id,
                    job_type=job_type,
                    domain=domain_from_key(raw["sk"]["S"]),
                    state=JobState(item.state),
                    attempt=int(item.attempt),
                    updated_at=float(item.updated_at),
                    started_at=_float(item.started_at),
                    finished_at=_float(item.finished_at),
                    progress=_float(item.progress),
                    result=item.result,
                    error=item.error,
                    will_retry=bool(item.will_retry),
                    note=item.note,
                )
            )
        return statuses

    # -- transport ------------------------------------------------------------------------------

    def _update(
        self, record: _Record, actions: list[Action], condition: Condition | None, *, return_old: bool = True
    ) -> tuple[bool, dict[str, Any] | None]:
        """One conditional UpdateItem. Returns (won, the item it lost to)."""
        kwargs = record.get_update_kwargs_from_instance(
            actions, condition, return_values_on_condition_failure="ALL_OLD" if return_old else None
        )
        try:
            self._call("update_item", kwargs, conditional=True)
        except _ConditionFailed as lost:
            return False, lost.item
        return True, None

    def _call(self, operation: str, kwargs: dict[str, Any], *, conditional: bool = False) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs["TableName"] = self._table_name
        try:
            return getattr(self._client, operation)(**kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ConditionalCheckFailedException":
                if conditional:
                    raise _ConditionFailed(exc.response.get("Item")) from exc  # type: ignore[arg-type]
                return None  # an unconditional caller's condition (a release) lost: nothing to do
            raise DedupUnavailable(f"DynamoDB {operation} failed: {code}: {exc}") from exc
        except BotoCoreError as exc:
            raise DedupUnavailable(f"DynamoDB {operation} failed: {exc}") from exc
        except (ValueError, TypeError) as exc:  # a request botocore could not serialise (say, a lone surrogate)
            raise DedupUnavailable(f"DynamoDB {operation} could not be sent: {exc}") from exc


def _final_attempt(raw: dict[str, Any], ref: JobRef) -> FinalAttempt:
    item = FinalItem.from_raw_data(raw)
    return FinalAttempt(
        ref,
        attempt=int(item.attempt),
        message_id=item.message_id,
        started_at=float(item.started_at),
        succeeded_at=_float(item.succeeded_at),
    )


def _failure(raw: dict[str, Any], job_type: str, domain: str | None, job_id: str) -> FailureRecord:
    item = FailureItem.from_raw_data(raw)
    return FailureRecord(
        job_id=job_id,
        job_type=job_type,
        domain=domain,
        attempt=int(item.attempt),
        at=float(item.at),
        error_class=item.error_class,
        message=item.message,
        traceback=item.traceback,
        dead_letter_reason=item.dead_letter_reason,
    )


class _ConditionFailed(Exception):
    def __init__(self, item: dict[str, Any] | None) -> None:
        self.item = item


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
