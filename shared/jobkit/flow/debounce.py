"""Debounce windows: of the jobs with one key pushed close together, the
latest owns the run.

The item ``{type}#debounce#{key}`` holds the latest job registered for the
key (``latest``, its domain and ID, and ``latest_at``, its enqueue time) and
``first_at``, the enqueue time of the first job registered since the key's
last run. A job goes through two steps:

1. **register**, on its first delivery: it becomes the latest, if no job
   enqueued at or after it already is (one conditional update). The runner then
   sends it again with a delay: the wait, or less when the key has waited
   ``max_wait_s`` since ``first_at``.
2. **claim**, when it comes back: it runs if it is still the latest (one
   conditional update that also closes the window). Otherwise a later job
   owns the run, and this one is *debounced*. A job's wait never reaches past
   ``first_at + max_wait_s``, so whichever job is the latest when that time
   comes is back by then and runs: a steady stream still runs once a window.

A job that was never registered (its record expired, or a sender copied the
runner's attribute) is never debounced by a record older than itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from jobkit.records.keys import NO_SORT, Kind, partition_key
from jobkit.records.table import Absent, Below, ConditionFailed, Equals, Item, Table

#: How long a key's item outlives its last job (TTL).
IDLE_TTL_S = 24 * 3600


@dataclass(frozen=True)
class Registered:
    """The job is the key's latest; ``first_at`` is when the key's window opened."""

    first_at: float


@dataclass(frozen=True)
class Debounced:
    """A job enqueued later owns the run."""

    by: str  # the owner, as "domain/id" for messages and logs


@dataclass(frozen=True)
class Run:
    """The job runs: it is the latest of its key (or no later job registered)."""


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
    :class:`~jobkit.records.DedupUnavailable` when the table cannot be reached."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def register(self, job_type: str, key: str, ref: str, enqueued_at: float, *, now: float) -> Registered | Debounced:
        item_key = (partition_key(job_type, Kind.DEBOUNCE, key), NO_SORT)
        values: Item = {"latest": ref, "latest_at": enqueued_at, "expires_at": int(now) + IDLE_TTL_S}
        try:
            item = self._table.update(
                item_key,
                values,
                defaults={"first_at": enqueued_at},
                # a later job, or itself again (a redelivery); of two pushed at the same
                # moment, the first to register keeps the run, so a late copy cannot take it
                when=Absent("latest_at") | Below("latest_at", enqueued_at) | Equals("latest", ref),
                want_new=True,
            )
        except ConditionFailed as lost:
            return Debounced(shown((lost.item or {}).get("latest")))
        first_at = (item or {}).get("first_at")
        return Registered(float(first_at) if isinstance(first_at, int | float) else enqueued_at)

    def claim(self, job_type: str, key: str, ref: str, registered_at: float, *, now: float) -> Run | Debounced:
        """Claim the run for a job that registered at ``registered_at``: it runs
        if it is still the latest; otherwise the latest, enqueued no earlier,
        owns the run."""
        item_key = (partition_key(job_type, Kind.DEBOUNCE, key), NO_SORT)
        ran = {"ran_at": now, "expires_at": int(now) + IDLE_TTL_S}
        try:
            self._table.update(item_key, ran, remove=["first_at"], when=Equals("latest", ref))
            return Run()
        except ConditionFailed as lost:
            found: Item = lost.item or {}
        latest_at = found.get("latest_at")
        if not _is_number(latest_at) or latest_at < registered_at:  # type: ignore[operator]
            return Run()  # no later job registered: its record expired, or it was never registered
        return Debounced(shown(found.get("latest")))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
