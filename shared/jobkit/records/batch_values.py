"""A batch's records as values: who it is, its members, its callbacks and its
counts (:mod:`jobkit.records.batches` reads and writes them)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jobkit.core.errors import BatchError

#: The shards of a batch's counts.
SHARDS = 16
#: The ends a member may have, each a count of the batch.
ENDS = ("succeeded", "skipped", "dead_lettered", "cancelled")
#: The ends a redriven member may leave (an operator sent it back): it counts as its new end.
FAILURES = ("dead_lettered", "cancelled")
PENDING = "pending"
WITHDRAWN = "withdrawn"  # counted in, then not sent
CALLBACKS = ("on_complete", "on_success")


@dataclass(frozen=True)
class BatchRef:
    """A batch: its ID within its domain."""

    batch_id: str
    domain: str | None


@dataclass(frozen=True)
class Member:
    """A job of a batch."""

    job_type: str
    job_id: str


@dataclass(frozen=True)
class Callback:
    """A job to push when a batch ends (its type, params and priority lane; the batch's domain)."""

    job_type: str
    params: Mapping[str, Any] = field(default_factory=dict)
    priority: str | None = None  # kept only when set: a callback without one is stored as before

    def stored(self) -> str:
        data = {"type": self.job_type, "params": dict(self.params)}
        if self.priority is not None:
            data["priority"] = self.priority
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def read(cls, text: str | None) -> Callback | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            priority = data.get("priority")
            return cls(str(data["type"]), dict(data["params"]), priority if isinstance(priority, str) else None)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass(frozen=True)
class Counts:
    """A batch's members: added, and how many ended each way."""

    added: int = 0
    ends: Mapping[str, int] = field(default_factory=dict)

    @property
    def ended(self) -> int:
        return sum(self.ends.get(end, 0) for end in ENDS)

    @property
    def pending(self) -> int:
        return self.added - self.ended

    @property
    def failures(self) -> int:
        return sum(self.ends.get(end, 0) for end in FAILURES)

    def summary(self) -> dict[str, int]:
        return {"total": self.added, "pending": self.pending, **{end: self.ends.get(end, 0) for end in ENDS}}


@dataclass(frozen=True)
class BatchRecord:
    """A batch's item and its counts."""

    ref: BatchRef
    description: str
    on_complete: Callback | None
    on_success: Callback | None
    opened_at: float | None
    sealed_at: float | None
    fired: Mapping[str, float]
    counts: Counts
    lane: str | None = None  # the priority lane of the job that opened it: its callbacks' and chain steps'

    @property
    def complete(self) -> bool:
        return self.sealed_at is not None and self.counts.pending == 0

    def due(self) -> list[str]:
        """The callbacks to push now: ``on_complete`` once every member ended, and
        ``on_success`` when none of them failed besides (both only once sealed)."""
        if not self.complete:
            return []
        due = [name for name in CALLBACKS if getattr(self, name) is not None and name not in self.fired]
        return [name for name in due if name == "on_complete" or self.counts.failures == 0]


def shard_of(member: Member) -> int:
    """A member's shard: a hash of its type and ID."""
    return zlib.crc32(f"{member.job_type}#{member.job_id}".encode()) % SHARDS


def clean_description(value: str) -> str:
    """A batch's description as its record keeps it: one line, at most 500 characters."""
    if not isinstance(value, str):
        raise BatchError(f"a batch's description is text, got {type(value).__name__}")
    return " ".join(value.split())[:500]
