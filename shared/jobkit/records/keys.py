"""The keys of the jobs table: every record is scoped by job type first.

Every partition key starts with ``{job type}#{kind}#``, so IAM can give each
runner its own types' records and nothing else (``dynamodb:LeadingKeys``: of
each type it runs, only the kinds it uses, :func:`kinds_used`), and
a job ID, a root signature or a dedup hash that repeats in another type never
meets the other type's records. The domain is part of the sort key wherever a
record belongs to one job, so a job ID reused in another domain has records of
its own too.

===========================================  ==========================================  =======================
partition key                                sort key                                    record
===========================================  ==========================================  =======================
``{type}#root#{rootJobSignature}``           ``{domain}``                                newest root timestamp
``{type}#dup#{dedup hash}``                  ``-``                                       duplicate claim
``{type}#once#{job id}``                     ``{domain}``                                delivery claim
``{type}#runs#{job id}``                     ``{domain}#{ms:015d}#{attempt:04d}``        one failed attempt
``{type}#runs#{job id}``                     ``{domain}#final``                          the final attempt
``{type}#status#{job id}``                   ``{domain}``                                job status
``{type}#defer#{SQS message id}``            ``-``                                       attempts before a deferral
``{type}#lease#{key}``                       ``-``                                       concurrency leases of a key
``{type}#rate#{key}``                        ``-``                                       rate-limit bucket of a key
``{type}#debounce#{key}``                    ``-``                                       debounce window of a key
``{type}#cancel#{job id}``                   ``{domain}``                                a job's cancellation
``{type}#cancel#*``                          ``{domain}``                                cancel_all's watermark
``{type}#cancel#*``                          ``*``                                       the type's newest cancellation
``_batch#{batch id}``                        ``{domain}``                                a batch (its callbacks)
``_batch#{batch id}#{shard}``                ``{domain}``                                a shard of a batch's counts
``_batch#{batch id}#{shard}``                ``{domain}#{type}#{job id}``                a batch's member
===========================================  ==========================================  =======================

A batch spans types, so its records are keyed by batch ID and domain under
a prefix no type name can take (:mod:`jobkit.records.batches`).

``{key}`` is a flow-control key's value (:meth:`jobkit.flow.options.FlowKey.value`):
``*`` for the whole type, ``-`` for none, ``={value}`` otherwise.
``{domain}`` is ``-`` for a job without a domain and ``={domain}`` otherwise,
so no domain can be mistaken for "none", nor for ``*``. Type names and job IDs never contain
``#`` (the wire format forbids it), and a job ID never is ``*``, so a key reads back unambiguously. A job's
failed attempts and its final attempt share a partition, so one query tells
what became of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

NO_SORT = "-"
#: The partition keys of batches start with it: no type name can (one starts with a letter).
BATCH_PREFIX = "_batch"
#: Every batch record, for IAM (:mod:`jobkit.records.batches`: a batch spans types).
BATCH_RECORDS_PATTERN = f"{BATCH_PREFIX}#*"


class Kind(StrEnum):
    ROOT = "root"
    DUPLICATE = "dup"
    DELIVERY = "once"
    RUNS = "runs"
    STATUS = "status"
    DEFERRAL = "defer"
    LEASES = "lease"
    RATE = "rate"
    DEBOUNCE = "debounce"
    CANCEL = "cancel"


def partition_key(job_type: str, kind: Kind, name: str) -> str:
    return f"{job_type}#{kind}#{name}"


def domain_key(domain: str | None) -> str:
    """The sort key (or its first part) of a record that belongs to one domain."""
    return NO_SORT if domain is None else f"={domain}"


def domain_from_key(key: str) -> str | None:
    return None if key == NO_SORT else key.removeprefix("=")


FINAL_SUFFIX = "final"


def failure_sort_key(domain: str | None, at: float, attempt: int) -> str:
    return f"{domain_key(domain)}#{int(at * 1000):015d}#{attempt:04d}"


def final_sort_key(domain: str | None) -> str:
    return f"{domain_key(domain)}#{FINAL_SUFFIX}"


def split_runs_sort_key(key: str) -> tuple[str | None, str]:
    """``(domain, rest)`` of a runs sort key; ``rest`` is ``final`` or ``{ms}#{attempt}``.
    The domain may itself hold ``#``, so the key is read from the right."""
    if key.endswith(f"#{FINAL_SUFFIX}"):
        return domain_from_key(key[: -len(FINAL_SUFFIX) - 1]), FINAL_SUFFIX
    head, ms, attempt = key.rsplit("#", 2)
    return domain_from_key(head), f"{ms}#{attempt}"


@dataclass(frozen=True)
class JobRef:
    """Whose records: a job ID means one job only within its type and domain
    (callers choose IDs, and may reuse one elsewhere)."""

    job_type: str
    domain: str | None
    job_id: str


@dataclass(frozen=True)
class Push:
    """One push of a job: its type, domain and ID, and the ``enqueuedAt`` its
    producer stamped in the body, which every copy of the push carries (a
    hop, a retry, a redrive, a producer's resend of the same body). A
    cancellation covers the pushes of an ID stamped at or before it."""

    job_type: str
    domain: str | None
    job_id: str
    enqueued_at: float | None

    @property
    def ref(self) -> JobRef:
        return JobRef(self.job_type, self.domain, self.job_id)


class TypeRecordOptions(Protocol):
    """The options of a job type that decide which kinds of record its runner
    writes (a :class:`jobkit.declaration.config.JobType` is one)."""

    @property
    def deliver_once(self) -> bool: ...
    @property
    def track_status(self) -> bool: ...
    @property
    def concurrency(self) -> object | None: ...
    @property
    def rate_limit(self) -> object | None: ...
    @property
    def debounce(self) -> object | None: ...


#: The kinds a runner may write for any type it runs, whatever the type declares:
#: roots (any spec may carry root params, and the runner records a root it runs,
#: :mod:`jobkit.dedup`), duplicate claims (a spec may ask for ``removeDuplicates``
#: itself, and a job class may override ``ignore_duplicates``), attempts (failures,
#: the final attempt, the watchdog's record) and deferrals (any job may be
#: re-enqueued after it used attempts: a delay hop, a deferral, a hold).
EVERY_TYPE_KINDS = (Kind.ROOT, Kind.DUPLICATE, Kind.RUNS, Kind.DEFERRAL)


def kinds_used(options: TypeRecordOptions) -> tuple[Kind, ...]:
    """The kinds of record a runner writes or reads for a type with these
    options, in :class:`Kind`'s order: :data:`EVERY_TYPE_KINDS`, plus delivery
    claims for ``deliver_once``, status for ``track_status``, and leases, rate
    buckets and debounce windows for the flow-control options the type declares."""
    used = set(EVERY_TYPE_KINDS)
    optional = {
        Kind.DELIVERY: options.deliver_once,
        Kind.STATUS: options.track_status,
        Kind.LEASES: options.concurrency is not None,
        Kind.RATE: options.rate_limit is not None,
        Kind.DEBOUNCE: options.debounce is not None,
    }
    used |= {kind for kind, wanted in optional.items() if wanted}
    return tuple(kind for kind in Kind if kind in used)


#: The name (in a cancellation's partition key) and the sort key of what is
#: the type's, not one job's: no job ID is ``*``, and no domain's key is.
TYPE_MARK = "*"


def kind_pattern(job_type: str, kind: Kind) -> str:
    """The records of one kind of a type (an IAM ``dynamodb:LeadingKeys`` pattern)."""
    return f"{job_type}#{kind}#*"


def own_records_pattern(job_type: str) -> str:
    """Every record of a type, of any kind. Only the operator policy's reads
    (``GetItem``, ``Query``) name it: a runner gets :func:`runner_records_patterns`,
    which names each kind it uses."""
    return f"{job_type}#*"


def root_records_pattern(job_type: str) -> str:
    """A type's root records only: what a producer of that type's root jobs writes."""
    return kind_pattern(job_type, Kind.ROOT)


def cancel_records_pattern(job_type: str) -> str:
    """A type's cancellations: what a producer and an operator write, and a runner only reads."""
    return kind_pattern(job_type, Kind.CANCEL)


def runner_records_patterns(job_type: str, options: TypeRecordOptions) -> list[str]:
    """The records a runner may use for a type it runs: one pattern per kind it uses."""
    return [kind_pattern(job_type, kind) for kind in kinds_used(options)]


def leading_key_patterns(
    own_types: Mapping[str, TypeRecordOptions], pushed_types: Iterable[str]
) -> tuple[list[str], list[str]]:
    """What a runner may touch: the kinds of record it uses for each type it runs,
    and the root records of the other types its jobs push (pushing a root job
    records it). Two sorted lists: the runner's own records, the pushed roots."""
    own = sorted(p for name, options in own_types.items() for p in runner_records_patterns(name, options))
    pushed = sorted(root_records_pattern(t) for t in set(pushed_types) - set(own_types))
    return own, pushed
