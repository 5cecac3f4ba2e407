"""``jobkit demo``: a small, realistic workload on the local stack.

A widely used template is edited (one htmlCacheUpdate root job fanning out
into leaves), a batch of pages is queued for refreshLinks (with some
duplicates), watchers get emails, and one job hits a bug that no retry fixes.
Everything runs to completion on an embedded AWS; then a table shows, per
type, what happened and how long jobs waited to be picked up.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from jobkit.clock import VirtualClock
from jobkit.config import Declaration
from jobkit.local.stack import LocalStack
from jobkit.outcome import Outcome, RecordResult
from jobkit.spec import JobSpecification, new_root_job_params

DOMAIN = "enwiki"


@dataclass(frozen=True)
class TypeSummary:
    job_type: str
    jobs: int
    succeeded: int
    failed_attempts: int
    dead_lettered: int
    skipped: int
    pickup_p50_ms: float | None
    pickup_p95_ms: float | None


def workload(now: float, *, backlinks: int = 2000, pages: int = 40, emails: int = 25) -> list[JobSpecification]:
    """The demo's jobs, as an app would push them after a burst of edits."""
    template = "Template:Infobox settlement"
    specs = [
        JobSpecification(
            "htmlCacheUpdate",
            {
                "table": "templatelinks",
                "page": template,
                "recursive": True,
                "backlinks": backlinks,
                **new_root_job_params(f"htmlCacheUpdate:templatelinks:{template}", now),
            },
        )
    ]
    for n in range(pages):
        # Every fourth page was edited twice: its second job is a duplicate.
        title = f"Page {n % (pages * 3 // 4)}"
        specs.append(JobSpecification("refreshLinks", {"title": title, "causeAction": "edit"}))
    specs.append(JobSpecification("refreshLinks", {"title": "Module:Broken", "causeAction": "edit"}))
    for n in range(emails):
        specs.append(
            JobSpecification(
                "enotifNotify", {"recipient": f"watcher{n}@example.org", "page": template, "editor": "Alice"}
            )
        )
    return specs


def summarize(results: Sequence[RecordResult], job_types: Sequence[str]) -> list[TypeSummary]:
    summaries = []
    for job_type in job_types:
        mine = [r for r in results if r.job_type == job_type]
        delays = sorted(r.pickup_delay_ms for r in mine if r.pickup_delay_ms is not None and r.attempt == 1)
        summaries.append(
            TypeSummary(
                job_type=job_type,
                jobs=len({r.job_id for r in mine}),
                succeeded=sum(r.outcome is Outcome.SUCCEEDED for r in mine),
                failed_attempts=sum(r.failed for r in mine),
                dead_lettered=sum(r.outcome in (Outcome.DEAD_LETTERED, Outcome.POISONED) for r in mine),
                skipped=sum(r.outcome in (Outcome.DUPLICATE, Outcome.SUPERSEDED, Outcome.REDELIVERED) for r in mine),
                pickup_p50_ms=_percentile(delays, 50),
                pickup_p95_ms=_percentile(delays, 95),
            )
        )
    return summaries


def _percentile(values: Sequence[float], pct: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def run_demo(declaration: Declaration, *, seed: int = 7) -> tuple[list[TypeSummary], float]:
    """Push the workload, run it to completion, and summarise. Returns the
    summaries and the wall time in seconds."""
    started = time.perf_counter()
    clock = VirtualClock(flowing=True)
    with LocalStack(declaration, clock=clock, seed=seed) as stack:
        stack.queue_group(DOMAIN).push(workload(clock.now()))
        stack.drain()
        summaries = summarize(stack.results.results, sorted(declaration.types))
    return summaries, time.perf_counter() - started


def print_summary(summaries: Sequence[TypeSummary], wall_s: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="jobkit demo: what happened to each job type")
    table.add_column("type", no_wrap=True, min_width=15)
    for column in ("jobs", "succeeded", "failed tries", "DLQ", "skipped", "p50 pickup", "p95 pickup"):
        table.add_column(column, justify="right", no_wrap=True)
    for s in summaries:
        table.add_row(
            s.job_type,
            str(s.jobs),
            str(s.succeeded),
            str(s.failed_attempts),
            str(s.dead_lettered),
            str(s.skipped),
            _ms(s.pickup_p50_ms),
            _ms(s.pickup_p95_ms),
        )
    console = Console(width=max(100, Console().width))
    console.print(table)
    console.print(f"finished in {wall_s:.1f} s wall time on the embedded AWS (moto)")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"
