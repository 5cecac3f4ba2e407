"""The keys of the jobs table: every record is scoped by job type first.

Every partition key starts with ``{job type}#{kind}#``, so IAM can give each
runner its own types' records and nothing else (``dynamodb:LeadingKeys``), and
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
===========================================  ==========================================  =======================

``{key}`` is a flow-control key's value (:meth:`jobkit.flow.options.FlowKey.value`):
``*`` for the whole type, ``-`` for none, ``={value}`` otherwise.
``{domain}`` is ``-`` for a job without a domain and ``={domain}`` otherwise,
so no domain can be mistaken for "none". Type names and job IDs never contain
``#`` (the wire format forbids it), so a key reads back unambiguously. A job's
failed attempts and its final attempt share a partition, so one query tells
what became of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

NO_SORT = "-"


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


def own_records_pattern(job_type: str) -> str:
    """Every record of a type (an IAM ``dynamodb:LeadingKeys`` pattern)."""
    return f"{job_type}#*"


def root_records_pattern(job_type: str) -> str:
    """A type's root records only: what a producer of that type's root jobs writes."""
    return f"{job_type}#{Kind.ROOT}#*"


def leading_key_patterns(own_types: Iterable[str], pushed_types: Iterable[str]) -> list[str]:
    """What a runner may touch: all records of the types it runs, and the root
    records of the types its jobs push (pushing a root job records it)."""
    own = sorted(set(own_types))
    return [own_records_pattern(t) for t in own] + [
        root_records_pattern(t) for t in sorted(set(pushed_types) - set(own))
    ]
