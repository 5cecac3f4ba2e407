"""A batch's records on their way through the runner, and the order its jobs run in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobkit.core.outcome import RecordResult
from jobkit.runner.delivery import Delivery


@dataclass(eq=False)
class Entry:
    """One record of the batch on its way through the runner."""

    record: Any
    delivery: Delivery | None = None
    result: RecordResult | None = None
    resume_at: int | None = None  # the admitter that left it for its turn (LATER)


def roots_first(entries: Sequence[Entry]) -> list[int]:
    """The order a batch's jobs run in: the batch's own, except that the jobs
    with one root signature (type, domain and signature) run together, where the
    first of them is, root jobs first and the newest root first. So a root
    supersedes its signature's stale leaves and older roots in its own batch,
    even when they came ahead of it and its producer did not record it at push."""

    def group(entry: Entry) -> tuple[str, str | None, str] | None:
        spec = entry.delivery.spec if entry.delivery is not None and entry.result is None else None
        if spec is None or not spec.has_root_job_params():
            return None
        signature = spec.root_job_signature
        return (spec.type, spec.domain, signature) if signature is not None else None

    first: dict[tuple[str, str | None, str], int] = {}
    keys: list[tuple[int, int, float, int]] = []
    for index, entry in enumerate(entries):
        key = group(entry)
        if key is None:
            keys.append((index, 0, 0.0, index))
            continue
        spec = entry.delivery.spec  # type: ignore[union-attr]
        timestamp = spec.root_job_timestamp or 0.0
        keys.append((first.setdefault(key, index), 0 if spec.is_root_job() else 1, -timestamp, index))
    return [key[3] for key in sorted(keys)]
