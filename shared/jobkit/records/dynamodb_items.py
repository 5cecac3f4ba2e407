"""The jobs table's items as pynamodb models: their attributes and types.
The key layout is :mod:`jobkit.records.keys`; the requests are built in
:mod:`jobkit.records.dynamodb`."""

from __future__ import annotations

from pynamodb.attributes import BooleanAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from jobkit.resources import DEFAULT_PREFIX, ResourceNames


class _Record(Model):
    """Attributes every item has. The table name is set per request: one
    deployment's table is another's stage, so it is configuration, not schema."""

    class Meta:
        table_name = ResourceNames(DEFAULT_PREFIX).table

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
    dead_letter_reason = UnicodeAttribute(null=True)


class FinalItem(_Record):
    attempt = NumberAttribute()
    message_id = UnicodeAttribute()
    started_at = NumberAttribute()
    succeeded_at = NumberAttribute(null=True)


class DeferralItem(_Record):
    attempts_used = NumberAttribute()


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
