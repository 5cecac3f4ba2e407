"""The overview: one row per job type, from the ops reports.

The counts are :func:`~jobkit.ops.queue_summaries`' (per queue, as SQS keeps
them: types that share a queue show the same figures, and the row says so;
a queue's priority lanes are rows of their own under the type's);
the rates, pickup delays and the worst type are :func:`~jobkit.ops.top_snapshot`'s,
so the row that stands out is the one ``jobkit top`` highlights.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobkit.ops import QueuesReport, QueueSummary, TopSnapshot, TypeLine
from jobkit.ops.queues import lanes_together
from jobkit.ui.history import History


@dataclass(frozen=True)
class OverviewRow:
    """One type: its queue's counts, its own rates, its last hour."""

    job_type: str
    queue: QueueSummary
    line: TypeLine
    ins: list[float | None]
    outs: list[float | None]
    worst: bool
    lanes: tuple[tuple[QueueSummary, float | None], ...] = ()  # with priority lanes: each lane, and its p95 pickup

    @property
    def shared(self) -> bool:
        return len(self.queue.types) > 1


@dataclass(frozen=True)
class Overview:
    """Every declared type's row, and what is missing and why."""

    at: float
    window_s: int
    rows: list[OverviewRow]
    notes: list[str]

    @property
    def dead_lettered(self) -> int:
        """Dead letters in all, each queue's DLQs once (a row's counts are its lanes' together)."""
        return sum({row.queue.queue: row.queue.dead_lettered for row in self.rows}.values())


def overview(queues: QueuesReport, snapshot: TopSnapshot, history: History) -> Overview:
    """Join the reports by type: the snapshot's lines, in its order."""
    by_queue: dict[str, list[QueueSummary]] = {}
    for summary in queues.queues:  # a queue's own lane first, then its priority lanes
        by_queue.setdefault(summary.queue, []).append(summary)
    worst = snapshot.worst
    rows = [
        OverviewRow(
            job_type=line.job_type,
            queue=lanes_together(by_queue[line.queue]),
            line=line,
            ins=history.ins.get(line.job_type, []),
            outs=history.outs.get(line.job_type, []),
            worst=line.job_type == worst,
            lanes=tuple(
                (summary, next((lane.pickup_p95_ms for lane in line.lanes if lane.priority == summary.priority), None))
                for summary in (by_queue[line.queue] if len(by_queue[line.queue]) > 1 else ())
            ),
        )
        for line in snapshot.lines
    ]
    notes = list(snapshot.notes)
    if history.error:
        notes.append(f"sparklines unavailable: {history.error}")
    return Overview(snapshot.at, snapshot.window_s, rows, notes)
