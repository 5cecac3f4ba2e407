"""The DynamoDB :class:`~jobkit.dedup.DedupBackend`: one table, modelled with pynamodb.

Items (``pk`` / ``sk`` keys, ``expires_at`` is the TTL attribute):

============================================  ==================  ===========================================
pk                                            sk                  attributes
============================================  ==================  ===========================================
``root#{domain}#{type}#{rootJobSignature}``   ``-``               ``root_ts``: newest rootJobTimestamp
``dup#{dedup hash}``                          ``-``               ``owner``, ``started_at``, ``lease_until``,
                                                                  ``last_success_start``
``once#{job id}``                             ``-``               ``state`` (running/done), ``owner``, ``lease_until``
``fail#{job id}``                             ``{ms}#{attempt}``  error class, message, traceback tail, attempt
``status#{job id}``                           ``-``               state, attempt, times, progress, result,
                                                                  error (``track_status`` types only)
============================================  ==================  ===========================================

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

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from jobkit.dedup import Claim, DedupUnavailable, FailureRecord
from jobkit.status import JobState, JobStatus

SINGLE = "-"


class _Record(Model):
    """Attributes every item has. The table name is set per request: one
    deployment's table is another's stage, so it is configuration, not schema."""

    class Meta:
        table_name = "jobkit-jobs"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    expires_at = NumberAttribute(null=True)


class RootRecord(_Record):
    root_ts = NumberAttribute()


class DuplicateRecord(_Record):
    owner = UnicodeAttribute(null=True)
    started_at = NumberAttribute(null=True)
    lease_until = NumberAttribute(null=True)
    last_success_start = NumberAttribute(null=True)


class DeliveryRecord(_Record):
    state = UnicodeAttribute()
    owner = UnicodeAttribute(null=True)
    lease_until = NumberAttribute(null=True)


class FailureItem(_Record):
    job_type = UnicodeAttribute()
    domain = UnicodeAttribute(null=True)
    attempt = NumberAttribute()
    at = NumberAttribute()
    error_class = UnicodeAttribute()
    message = UnicodeAttribute()
    traceback = UnicodeAttribute()


class StatusItem(_Record):
    job_type = UnicodeAttribute()
    domain = UnicodeAttribute(null=True)
    state = UnicodeAttribute()
    attempt = NumberAttribute()
    updated_at = NumberAttribute()
    started_at = NumberAttribute(null=True)
    finished_at = NumberAttribute(null=True)
    progress = NumberAttribute(null=True)
    result = UnicodeAttribute(null=True)  # JSON text
    error = UnicodeAttribute(null=True)
    will_retry = BooleanAttribute(null=True)
    note = UnicodeAttribute(null=True)


class DynamoDBDedupBackend:
    """Records in one DynamoDB table.

    Args:
        client: a boto3 DynamoDB client (injected; create it once per container).
        table_name: the deployed table (``Declaration.table_name``).
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table_name = table_name

    # -- roots -----------------------------------------------------------------------

    def advance_root(self, key: str, timestamp: float, expires_at: int) -> float:
        record = RootRecord(f"root#{key}", SINGLE)
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
        self, key: str, owner: str, now: float, lease_until: float, enqueued_at: float, expires_at: int
    ) -> Claim:
        d = DuplicateRecord
        unclaimed = d.owner.does_not_exist() | (d.lease_until < now)
        not_succeeded_since = d.last_success_start.does_not_exist() | (d.last_success_start <= enqueued_at)
        won, old = self._update(
            d(f"dup#{key}", SINGLE),
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

    def release_duplicate(self, key: str, owner: str, success_started_at: float | None, expires_at: int) -> None:
        d = DuplicateRecord
        record = d(f"dup#{key}", SINGLE)
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

    def claim_delivery(self, job_id: str, owner: str, now: float, lease_until: float, expires_at: int) -> Claim:
        d = DeliveryRecord
        won, old = self._update(
            d(f"once#{job_id}", SINGLE),
            [d.state.set("running"), d.owner.set(owner), d.lease_until.set(lease_until), d.expires_at.set(expires_at)],
            d.state.does_not_exist() | ((d.state == "running") & (d.lease_until < now)),
        )
        if won or old is None:
            return Claim(True)
        stored = d.from_raw_data(old)
        return Claim(False, holder=stored.owner, lease_until=_float(stored.lease_until), done=stored.state == "done")

    def finish_delivery(self, job_id: str, owner: str, succeeded: bool, expires_at: int) -> None:
        d = DeliveryRecord
        record = d(f"once#{job_id}", SINGLE)
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

    # -- failure records ----------------------------------------------------------------------

    def put_failure(self, record: FailureRecord, expires_at: int) -> None:
        item = FailureItem(
            f"fail#{record.job_id}",
            f"{int(record.at * 1000):015d}#{record.attempt:04d}",
            expires_at=expires_at,
            job_type=record.job_type,
            domain=record.domain,
            attempt=record.attempt,
            at=record.at,
            error_class=record.error_class,
            message=record.message,
            traceback=record.traceback,
        )
        self._call("put_item", item.get_save_kwargs_from_instance())

    def failures(self, job_id: str, limit: int) -> list[FailureRecord]:
        response = self._call(
            "query",
            {
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": f"fail#{job_id}"}},
                "ScanIndexForward": False,
                "Limit": limit,
            },
        )
        records = []
        for raw in response.get("Items", []):
            item = FailureItem.from_raw_data(raw)
            records.append(
                FailureRecord(
                    job_id=job_id,
                    job_type=item.job_type,
                    domain=item.domain,
                    attempt=int(item.attempt),
                    at=float(item.at),
                    error_class=item.error_class,
                    message=item.message,
                    traceback=item.traceback,
                )
            )
        return records

    # -- status records -------------------------------------------------------------------------

    def put_status(self, status: JobStatus, expires_at: int) -> None:
        # A whole-item PutItem: the tracker holds the attempt's full state, so
        # every write is one request and no write depends on an earlier one.
        item = StatusItem(
            f"status#{status.job_id}",
            SINGLE,
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

    def status(self, job_id: str) -> JobStatus | None:
        response = self._call(
            "get_item", {"Key": {"pk": {"S": f"status#{job_id}"}, "sk": {"S": SINGLE}}, "ConsistentRead": True}
        )
        raw = response.get("Item")
        if not raw:
            return None
        item = StatusItem.from_raw_data(raw)
        return JobStatus(
            job_id=job_id,
            job_type=item.job_type,
            domain=item.domain,
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


class _ConditionFailed(Exception):
    def __init__(self, item: dict[str, Any] | None) -> None:
        self.item = item


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
