"""JobSpecification: a job to run, as data, and its JSON wire format.

A spec is what an app pushes: a type, params and a few options. It is
enqueued without importing the job's class (MediaWiki's IJobSpecification),
so any process, even one in another language, can push jobs.

The wire format is versioned JSON, described by ``docs/job-spec.schema.json``.
:func:`JobSpecification.from_message` checks every field the schema checks,
without importing a schema library on the Lambda's cold-start path.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from jobkit.core.chain_link import ChainLink
from jobkit.core.errors import SpecError
from jobkit.core.time_hints import ahead as _ahead
from jobkit.core.time_hints import milliseconds_hint as _milliseconds_hint
from jobkit.core.wire import (
    BATCH_WIRE_VERSION,
    ID_PATTERN,
    KNOWN_FIELDS,
    LANE_PATTERN,
    MAX_DOMAIN_BYTES,
    TYPE_PATTERN,
    WIRE_VERSION,
    batch_id,
    chain_link,
    check_extra_fields,
    decode,
    is_lane_name,
    is_number,
    priority_of,
    sqs_json,
    utc_time,
    valid_domain,
    validate,
    validate_root_params,
)

#: Params that carry root-job bookkeeping (MediaWiki's names).
ROOT_JOB_PARAMS = ("rootJobSignature", "rootJobTimestamp", "rootJobIsSelf")

#: Params that never take part in duplicate detection: two jobs that differ
#: only in their root job, their release time or the request that made them
#: are duplicates (MediaWiki's Job::getDeduplicationInfo()).
DEDUP_EXCLUDED_PARAMS = (*ROOT_JOB_PARAMS, "jobReleaseTimestamp", "requestId")

#: How far ahead of the checking clock (the pusher's, then the runner's) an
#: enqueue time or a root-job timestamp may be: hosts' clocks drift, but a value
#: further ahead is a skewed host or milliseconds passed as seconds. A root
#: timestamp from the future would supersede every real edit until it expires.
MAX_CLOCK_SKEW_S = 300.0
#: The latest release time: this long after the enqueue time. A longer delay
#: hops every 15 minutes for a year; a release time in milliseconds would hop forever.
MAX_RELEASE_DELAY_S = 366 * 24 * 3600.0


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: equal data, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def new_root_job_params(key: str, now: float) -> dict[str, Any]:
    """Params that make a job a root job (MediaWiki's Job::newRootJobParams).

    Args:
        key: what the root job is about, e.g. ``"htmlCacheUpdate:enwiki:Template:Infobox"``.
            Jobs with the same key supersede each other's leaves.
        now: the root job's timestamp (epoch seconds).
    """
    return {
        "rootJobIsSelf": True,
        "rootJobSignature": hashlib.sha1(key.encode("utf-8")).hexdigest(),
        "rootJobTimestamp": now,
    }


class JobSpecification:
    """A job to run: type, params and options, without the job's code.

    Args:
        type: the job type, as declared in ``infra/jobs.toml`` (``"htmlCacheUpdate"``).
        params: JSON-serialisable params. Root-job params use MediaWiki's names.
        domain: the tenant (MediaWiki's wiki ID). ``None`` takes the pushing group's domain.
        remove_duplicates: skip this job if an identical one started after it was
            enqueued and succeeded (MediaWiki's ignoreDuplicates).
        remove_duplicates_ignore_params: params left out of the duplicate check.
        release_at: run no earlier than this (epoch seconds or an aware datetime).
        delay: run no earlier than this many seconds after the push. Exclusive with ``release_at``.
        id: the job ID; a new UUID if not given.
        batch: the ID of the batch it is a member of (:meth:`jobkit.JobQueueGroup.batch`
            sets it); its body is then of wire version 2.
        chain: the chain step it is a job of (:meth:`jobkit.JobQueueGroup.chain` sets
            it), with what the step before left for it; a chain step's job is a batch member.
        priority: the priority lane of its type's queue it is sent to (``"high"``);
            ``None``: the queue's default lane, or, pushed from a job, the job's own lane.
        extra_fields: body fields this jobkit does not know (a newer producer's
            optional ones, docs/wire-format.md), written back into the body as
            given; :meth:`from_dict` keeps a body's. None may be a field jobkit
            knows, so none stands for one of jobkit's.
    """

    __slots__ = (
        "_id_generated",
        "batch",
        "chain",
        "delay",
        "domain",
        "enqueued_at",
        "extra_fields",
        "id",
        "params",
        "priority",
        "release_at",
        "remove_duplicates",
        "remove_duplicates_ignore_params",
        "type",
    )

    def __init__(
        self,
        type: str,  # noqa: A002 - MediaWiki's name, and the wire field's
        params: Mapping[str, Any] | None = None,
        *,
        domain: str | None = None,
        remove_duplicates: bool = False,
        remove_duplicates_ignore_params: Iterable[str] = (),
        release_at: float | datetime | None = None,
        delay: float | timedelta | None = None,
        id: str | None = None,  # noqa: A002
        enqueued_at: float | None = None,
        extra_fields: Mapping[str, Any] | None = None,
        batch: str | None = None,
        chain: ChainLink | None = None,
        priority: str | None = None,
    ) -> None:
        if not isinstance(type, str) or not TYPE_PATTERN.fullmatch(type):
            raise SpecError(f"job type must be a name like 'htmlCacheUpdate', got {type!r}")
        if params is None:
            params = {}
        if not isinstance(params, Mapping) or not all(isinstance(k, str) for k in params):
            raise SpecError(f"{type}: params must be a mapping with string keys")
        if release_at is not None and delay is not None:
            raise SpecError(f"{type}: give release_at or delay, not both")
        if domain is not None and (not isinstance(domain, str) or not valid_domain(domain)):
            raise SpecError(f"{type}: domain must be a non-empty string of at most {MAX_DOMAIN_BYTES} bytes in UTF-8")
        self.type = type
        self.params: dict[str, Any] = dict(params)
        self.domain = domain
        self.remove_duplicates = bool(remove_duplicates)
        self.remove_duplicates_ignore_params: tuple[str, ...] = tuple(remove_duplicates_ignore_params)
        self.release_at = _epoch(release_at) if release_at is not None else None
        self.delay = delay.total_seconds() if isinstance(delay, timedelta) else delay
        if self.delay is not None and (not is_number(self.delay) or self.delay < 0):
            raise SpecError(f"{type}: delay must be a non-negative number of seconds")
        self._id_generated = id is None
        self.id = id if id is not None else str(uuid.uuid4())
        if not isinstance(self.id, str) or not ID_PATTERN.fullmatch(self.id):
            raise SpecError(f"{type}: job id must match {ID_PATTERN.pattern}, got {self.id!r}")
        self.enqueued_at = enqueued_at
        if batch is not None and (not isinstance(batch, str) or not ID_PATTERN.fullmatch(batch)):
            raise SpecError(f"{type}: batch ID must match {ID_PATTERN.pattern}, got {batch!r}")
        self.batch = batch
        if chain is not None and (not isinstance(chain, ChainLink) or batch is None):
            raise SpecError(f"{type}: chain must be a ChainLink, and a chain step's job is a batch member")
        self.chain = chain
        if priority is not None and not is_lane_name(priority):
            raise SpecError(f"{type}: priority must be a lane's name matching {LANE_PATTERN.pattern}, got {priority!r}")
        self.priority = priority
        self.extra_fields: dict[str, Any] = dict(extra_fields or {})
        check_extra_fields(self.type, self.extra_fields)

    # -- MediaWiki's IJobSpecification ---------------------------------

    def deduplication_info(self, ignore_params: Iterable[str] = ()) -> dict[str, Any]:
        """What identifies this job for duplicate detection: type, domain and params.

        Root-job params, the release time, the request ID and the ignored params
        are left out.
        """
        excluded = {*DEDUP_EXCLUDED_PARAMS, *self.remove_duplicates_ignore_params, *ignore_params}
        params = {k: v for k, v in self.params.items() if k not in excluded}
        return {"type": self.type, "domain": self.domain, "params": params}

    def dedup_hash(self, ignore_params: Iterable[str] = ()) -> str:
        """SHA-1 hex of the canonical JSON of :meth:`deduplication_info`."""
        try:
            data = canonical_json(self.deduplication_info(ignore_params)).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
            raise SpecError(f"{self.type} {self.id}: params are not JSON-serialisable: {exc}") from exc
        return hashlib.sha1(data).hexdigest()

    def root_job_params(self) -> dict[str, Any]:
        """The rootJobSignature and rootJobTimestamp params, if any (for leaf jobs to carry)."""
        return {k: self.params[k] for k in ("rootJobSignature", "rootJobTimestamp") if k in self.params}

    def has_root_job_params(self) -> bool:
        return "rootJobSignature" in self.params and "rootJobTimestamp" in self.params

    def is_root_job(self) -> bool:
        return self.has_root_job_params() and self.params.get("rootJobIsSelf") is True

    @property
    def root_job_signature(self) -> str | None:
        value = self.params.get("rootJobSignature")
        return value if isinstance(value, str) else None

    @property
    def root_job_timestamp(self) -> float | None:
        value = self.params.get("rootJobTimestamp")
        return float(value) if value is not None and is_number(value) else None

    @property
    def id_generated(self) -> bool:
        """Whether the ID was made up here (no ``id`` was given): jobs pushed from
        a job get IDs derived from their parent's instead, so a retried parent
        pushes the same IDs again."""
        return self._id_generated

    def check_root_job_params(self) -> None:
        """Refuse half or malformed root-job params, as a runner would.

        Raises:
            SpecError: a signature without a timestamp (or a null one), or either malformed.
        """
        validate_root_params(self.params)

    def check_times(self, now: float) -> None:
        """Refuse timestamps no clock could have made (see :data:`MAX_CLOCK_SKEW_S`).

        Raises:
            SpecError: naming the field: an enqueue time or root-job timestamp more
                than :data:`MAX_CLOCK_SKEW_S` ahead of ``now``, or a release time
                more than :data:`MAX_RELEASE_DELAY_S` after the enqueue time.
        """
        fields = (("enqueuedAt", self.enqueued_at), ("params.rootJobTimestamp", self.root_job_timestamp))
        for field, value in fields:
            if value is not None and value > now + MAX_CLOCK_SKEW_S:
                raise SpecError(
                    f"{self.type} {self.id}: {field} is {_ahead(value, now)} ahead of this clock, more than the"
                    f" {MAX_CLOCK_SKEW_S:.0f} s of skew allowed{_milliseconds_hint(value)}"
                )
        release, enqueued = self.release_at, self.enqueued_at
        if release is not None and enqueued is not None and release > enqueued + MAX_RELEASE_DELAY_S:
            raise SpecError(
                f"{self.type} {self.id}: releaseAt is {_ahead(release, enqueued)} after enqueuedAt, more than"
                f" the {MAX_RELEASE_DELAY_S / 86400:.0f} days a job may be delayed{_milliseconds_hint(release)}"
            )

    @property
    def ready_at(self) -> float | None:
        """When the job may first run: its release time, else its enqueue time."""
        return self.release_at if self.release_at is not None else self.enqueued_at

    # -- lifecycle -------------------------------------------------------

    def stamped(self, now: float) -> JobSpecification:
        """A copy ready to send: enqueue time set (kept if already set), delay made absolute."""
        copy = self.replace()
        if copy.enqueued_at is None:
            copy.enqueued_at = now
        if copy.delay is not None:
            copy.release_at = now + copy.delay
            copy.delay = None
        return copy

    def replace(self, **changes: Any) -> JobSpecification:
        """A copy with some attributes changed (the ID stays unless given)."""
        copy = object.__new__(JobSpecification)
        for name in self.__slots__:
            object.__setattr__(copy, name, changes.get(name, getattr(self, name)))
        copy.params = dict(copy.params)
        copy.extra_fields = dict(copy.extra_fields)
        if "id" in changes:
            copy._id_generated = False
        return copy

    # -- wire format -----------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        if self.enqueued_at is None:
            raise SpecError(f"{self.type} {self.id}: not stamped with an enqueue time; push it, or call stamped()")
        data: dict[str, Any] = {
            "v": WIRE_VERSION if self.batch is None else BATCH_WIRE_VERSION,
            "id": self.id,
            "type": self.type,
            "domain": self.domain,
            "params": self.params,
            "enqueuedAt": self.enqueued_at,
            "releaseAt": self.release_at,
            "removeDuplicates": self.remove_duplicates,
        }
        if self.batch is not None:
            data["batch"] = {"id": self.batch}
        if self.chain is not None:
            data["chain"] = self.chain.to_wire()
        if self.priority is not None:
            data["priority"] = self.priority
        if self.remove_duplicates_ignore_params:
            data["removeDuplicatesIgnoreParams"] = list(self.remove_duplicates_ignore_params)
        if self.extra_fields:
            # checked again: the dict may have changed since the spec was made
            check_extra_fields(f"{self.type} {self.id}", self.extra_fields)
            data.update(self.extra_fields)
        return data

    def to_message(self) -> str:
        """The SQS message body (compact JSON).

        Raises:
            SpecError: naming the job, if the params are not JSON-serialisable, nest
                too deeply to serialise, or hold text that is not valid Unicode (a lone
                surrogate, which neither SQS nor UTF-8 can carry).
        """
        try:
            body = json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except RecursionError as exc:
            raise SpecError(f"{self.type} {self.id}: params nest too deeply to serialise") from exc
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{self.type} {self.id}: params are not JSON-serialisable: {exc}") from exc
        if body.isascii():  # (json.dumps escapes control characters: nothing here SQS refuses)
            return body
        try:  # (a scan in C: a large body's regex search would take milliseconds)
            body.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SpecError(
                f"{self.type} {self.id}: params hold a lone UTF-16 surrogate at character {exc.start}:"
                " not valid Unicode text, which SQS cannot carry"
            ) from exc
        return sqs_json(body) if "\ufffe" in body or "\uffff" in body else body

    @classmethod
    def from_message(cls, body: str | bytes) -> JobSpecification:
        """Parse and validate a message body.

        Raises:
            SpecError: the body is not JSON (NaN and Infinity are not JSON either),
                nests too deeply to parse, holds a lone UTF-16 surrogate, has another
                wire version, or breaks the schema.
        """
        return cls.from_dict(decode(body))

    @classmethod
    def from_dict(cls, data: Any) -> JobSpecification:
        """Build a spec from a decoded body, checking it against the v1 schema.

        ``priorAttempts``, which runners before 0.2 wrote into deferred copies,
        is accepted and ignored: a runner keeps that count where no sender can
        set it (see :mod:`jobkit.dedup`). A field v1 does not name is a newer
        producer's: kept in :attr:`extra_fields`, so that writing the spec
        (:meth:`to_message`) sends it on.
        """
        validate(data)
        # validate() checked all the constructor would: set the fields as it would, without checking twice
        spec = cls.__new__(cls)
        spec.type, spec.params, spec.domain = data["type"], dict(data["params"]), data.get("domain")
        spec.remove_duplicates = data.get("removeDuplicates", False)
        spec.remove_duplicates_ignore_params = tuple(data.get("removeDuplicatesIgnoreParams", ()))
        release_at = data.get("releaseAt")
        spec.release_at = float(release_at) if release_at is not None else None
        spec.delay, spec._id_generated, spec.id = None, False, data["id"]
        enqueued_at = data["enqueuedAt"]
        spec.enqueued_at = float(enqueued_at) if is_number(enqueued_at) else utc_time(enqueued_at)
        spec.batch = batch_id(data["batch"]) if "batch" in data else None
        spec.chain = chain_link(data["chain"]) if "chain" in data else None
        spec.priority = priority_of(data)
        spec.extra_fields = {name: value for name, value in data.items() if name not in KNOWN_FIELDS}
        return spec

    # -- value semantics -------------------------------------------------

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__ if name != "_id_generated")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobSpecification) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable params: not hashable

    def __repr__(self) -> str:
        return f"JobSpecification({self.type!r}, id={self.id!r}, domain={self.domain!r})"


def _epoch(value: float | datetime) -> float:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise SpecError("release_at must be timezone-aware (UTC); naive datetimes are ambiguous")
        return value.timestamp()
    if not is_number(value):
        raise SpecError(f"release_at must be epoch seconds or a datetime, got {value!r}")
    return float(value)
