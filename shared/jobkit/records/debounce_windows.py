"""Debounce windows: of the jobs with one key pushed close together, the
latest owns the run.

A window belongs to one type, domain and key: the item ``{type}#debounce#{key}``
with the domain as its sort key (a job in one domain does none of another
domain's work). It holds the latest job registered (``latest``, its domain and
ID; ``latest_at``, its ordering time, :func:`jobkit.sqs.pushed_at`; ``token``,
the message that registered it, so two pushes of one job ID are two
registrations) and ``first_at``, the ordering time of the first job registered
since the window last ran. Once the latest has claimed the run, the item also
holds ``ran_at`` (when) and ``ran_ref`` (which job), until a job registers
again. A job goes through two steps:

1. **register**, on its first delivery: it becomes the latest, if no job
   pushed at or after it already is (one conditional update), or if the
   latest has already run and its run cannot have covered this job: the run
   began before SQS first saw the job, or before the job's release time (a
   producer's slow clock, a schedule's firing sent late, a delayed job), or
   the latest is this very job (a redrive of a failed owner, or a push of its
   ID that arrives after its run). The runner then
   sends it again with a delay: the wait, or less when the key has waited
   ``max_wait_s`` since ``first_at``.
2. **claim**, when it comes back: it runs if its registration is still the
   latest (one conditional update). Otherwise a later job owns the run, and
   this one is *debounced*. A job's wait never reaches past
   ``first_at + max_wait_s``, so whichever job is the latest when that time
   comes is back by then and runs: a steady stream still runs once a window.

A job that was never registered (its record expired, or a sender copied the
runner's attribute) is never debounced by a record older than itself. Nor is
a registered job whose run failed, when a job that its run could not cover
opened a new window since: its retry still runs, for the jobs it debounced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from jobkit.records.keys import Kind, domain_key, partition_key
from jobkit.records.table import Absent, Below, ConditionFailed, Equals, Item, Table

#: How long a key's item outlives its last job (TTL).
IDLE_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Registered:
    """The job is the key's latest; ``first_at`` is when the key's window opened."""

    first_at: float


@dataclass(frozen=True)
class Debounced:
    """A job pushed later owns the run."""

    by: str  # the owner, as "domain/id" for messages and logs
    same_job: bool = False  # the owner is another push of this very job ID
    latest: str | None = None  # the owner's ref (:func:`job_ref`)
    latest_at: float | None = None  # the owner's ordering time (when it was pushed)

    @property
    def owner(self) -> tuple[str | None, str] | None:
        """The owner's domain and job ID, if the record names one that reads back."""
        try:
            domain, job_id = json.loads(self.latest or "")
        except (ValueError, TypeError):
            return None
        if (domain is None or isinstance(domain, str)) and isinstance(job_id, str):
            return domain, job_id
        return None

    @property
    def reason(self) -> str:
        return "another delivery of this job ID owns the run" if self.same_job else f"job {self.by} was pushed later"


@dataclass(frozen=True)
class Run:
    """The job runs, and owes its run to the jobs it debounced: its own
    registration is still the latest of its key, or no job pushed later has
    registered since (see :meth:`DebounceWindows.claim`)."""


def job_ref(domain: str | None, job_id: str) -> str:
    """A job's name in a debounce record: its ID means one job only within its domain."""
    return json.dumps([domain, job_id], separators=(",", ":"))


def shown(ref: object) -> str:
    try:
        domain, job_id = json.loads(str(ref))
    except (ValueError, TypeError):
        return str(ref)
    return f"{domain}/{job_id}" if domain is not None else str(job_id)


class DebounceWindows:
    """Debounce records in the jobs table; each step is one request. Raises
    :class:`~jobkit.records.TableUnavailable` when the table cannot be reached."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def register(
        self,
        job_type: str,
        domain: str | None,
        key: str,
        ref: str,
        token: str,
        pushed_at: float,
        *,
        ready_at: float,
        now: float,
    ) -> Registered | Debounced:
        """Make the job its window's latest, unless a job pushed at or after it
        already is and its run (if it ran) can cover this job: ``ready_at`` is
        the earliest a run could (when SQS first saw the job, or its release time)."""
        values: Item = {"latest": ref, "latest_at": pushed_at, "token": token, "expires_at": int(now) + IDLE_TTL_S}
        try:
            item = self._table.update(
                _window(job_type, domain, key),
                values,
                remove=["ran_at", "ran_ref"],
                defaults={"first_at": pushed_at},
                # a later job, or this very message again (a redelivery); of two pushed
                # at the same moment, and of two pushes of one job ID, the first to
                # register keeps the run, so a late copy cannot take it. A run that
                # began before the job was ready, or that was this job's own, covers
                # nothing of it: a new window opens
                when=Absent("latest_at")
                | Below("latest_at", pushed_at)
                | Equals("token", token)
                | Below("ran_at", ready_at)
                | Equals("ran_ref", ref),
                want_new=True,
            )
        except ConditionFailed as lost:
            return _debounced_by(lost.item or {}, ref)
        first_at = (item or {}).get("first_at")
        return Registered(float(first_at) if _is_number(first_at) else pushed_at)  # type: ignore[arg-type]

    def registered_again(
        self, job_type: str, domain: str | None, key: str, token: str, *, now: float
    ) -> Registered | None:
        """Whether the message ``token`` is still its window's latest, for a
        delivery of it that must not take the window afresh (its root has been
        superseded since it registered): it registered on an earlier delivery
        whose wait was never sent (a crashed invocation, a failed send), and the
        jobs it debounced since count on its run. ``None``: it is not the latest."""
        try:
            item = self._table.update(
                _window(job_type, domain, key),
                {"expires_at": int(now) + IDLE_TTL_S},
                when=Equals("token", token),
                want_old=False,
                want_new=True,
            )
        except ConditionFailed:
            return None
        first_at = (item or {}).get("first_at")
        return Registered(float(first_at) if _is_number(first_at) else now)  # type: ignore[arg-type]

    def claim(
        self, job_type: str, domain: str | None, key: str, ref: str, token: str | None, pushed_at: float, *, now: float
    ) -> Run | Debounced:
        """Claim the run for the job that registered as ``token``: it runs if its
        registration is still the latest; otherwise the latest, pushed no
        earlier, owns the run. (``token`` is ``None`` for a copy registered by an
        older runner, which named the job only.)

        When its registration is gone and no job pushed later holds the window,
        it runs too, and owes that run: a job whose run began before it was
        ready (a release time, a producer's slow clock) may have opened a new
        window over this job's after this job ran and failed, and the jobs this
        one debounced count on its retry. The same answer serves a record that
        expired, or a sender that copied the attribute: that costs a run that a
        newer root would have skipped, never a job."""
        ran: Item = {"ran_at": now, "ran_ref": ref, "expires_at": int(now) + IDLE_TTL_S}
        mine = Equals("token", token) if token is not None else Equals("latest", ref)
        try:
            self._table.update(_window(job_type, domain, key), ran, remove=["first_at"], when=mine)
            return Run()
        except ConditionFailed as lost:
            found: Item = lost.item or {}
        latest_at = found.get("latest_at")
        if not _is_number(latest_at) or latest_at < pushed_at:  # type: ignore[operator]
            return Run()  # no later job registered: a new window over its own, an expired record, a copied attribute
        return _debounced_by(found, ref)


def _window(job_type: str, domain: str | None, key: str) -> tuple[str, str]:
    return partition_key(job_type, Kind.DEBOUNCE, key), domain_key(domain)


def _debounced_by(found: Item, ref: str) -> Debounced:
    latest, latest_at = found.get("latest"), found.get("latest_at")
    return Debounced(
        shown(latest),
        same_job=latest == ref,
        latest=str(latest) if latest is not None else None,
        latest_at=float(latest_at) if _is_number(latest_at) else None,  # type: ignore[arg-type]
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
