"""``jobkit demo``: the 2012 job-queue redesign RFC's story, on the local stack.

A widely used template is edited three times in quick succession. Each edit
pushes an htmlCacheUpdate root job, which fans out into thousands of leaves in
bounded steps (each edit's root is a batch, which its leaves join: an
editReached job says how far the edit got once the last has ended), and
refreshLinks jobs for the pages that use the template; the watchers get
emails. The newer edits supersede the older edits' leaves, which
are acknowledged without running; refreshLinks jobs for the same page collapse
into one run; the emails, on their own queue, are picked up quickly while the
purge backlog drains. One page's parser always crashes, so its job ends in the
DLQ with the reason; one digest email is delayed by an hour.

The summary counts what SQS accepted from every push and what became of each
job, and checks that they balance: pushed = run + superseded + duplicate +
dead-lettered.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobkit.core.clock import VirtualClock
from jobkit.core.errors import ConfigError
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification, new_root_job_params
from jobkit.declaration.config import Declaration
from jobkit.local.results import EnqueueCounter
from jobkit.local.stack import LocalStack

#: The demo's own declaration: its job classes are in the package (jobkit.local.rfc_demo_jobs).
DECLARATION = Path(__file__).with_name("rfc_demo.toml")
#: The types the story pushes; another declaration given to the demo must declare them.
DEMO_TYPES = ("htmlCacheUpdate", "refreshLinks", "enotifNotify")
#: Each edit's callback, if the declaration has it (and htmlCacheUpdate declares batches).
REACHED = "editReached"
DOMAIN = "enwiki"
TEMPLATE = "Template:Infobox settlement"
#: Three saves in quick succession (virtual seconds): each comes while the runners are still at
#: the last one's jobs, so copies of a page collapse and the older edits' leaves are superseded.
EDIT_GAP_S = 12.0
#: The dead letters the report names one by one (another declaration's may have many).
SHOWN_DEAD_LETTERS = 5
#: A job's work, in virtual seconds, by queue: a purge is quick, a parse slow, an email quicker.
JOB_S = {"htmlCacheUpdate": 2.0, "refreshLinks": 3.0, "enotifNotify": 0.05}


def batch_s(queue: str, records: int) -> float:
    """How long a batch keeps its container busy, in virtual seconds: a model
    (an invocation's overhead, and each job's work), not this machine's speed,
    so every run with a seed gives the same figures on any machine."""
    return 0.02 + JOB_S.get(queue, 0.02) * records


def missing_types(declaration: Declaration) -> list[str]:
    """The story's types that ``declaration`` does not declare."""
    return [name for name in DEMO_TYPES if name not in declaration.types]


@dataclass(frozen=True)
class TypeSummary:
    job_type: str
    pushed: int
    tally: Mapping[str, int]  # jobs per column of Outcome.tallies()
    pickup_p50_ms: float | None
    pickup_p95_ms: float | None

    @property
    def run(self) -> int:
        return self.tally["run"]

    @property
    def superseded(self) -> int:
        return self.tally["superseded"]

    @property
    def duplicate(self) -> int:
        return self.tally["duplicate"]

    @property
    def dead_lettered(self) -> int:
        return self.tally["dead-lettered"]

    @property
    def balances(self) -> bool:
        return self.pushed == sum(self.tally.values())


@dataclass(frozen=True)
class DemoReport:
    summaries: list[TypeSummary]
    dead_letter_reasons: list[str]
    delayed: list[str]
    wall_s: float
    source: str = ""  # the declaration it ran on
    reached: list[str] = field(default_factory=list)  # each edit's batch, as its on_complete job said it

    @property
    def balances(self) -> bool:
        return all(s.balances for s in self.summaries)


def edit_jobs(edit: int, now: float, *, backlinks: int, pages: int, watchers: int) -> list[JobSpecification]:
    """What one edit of the template queues (MediaWiki's LinksUpdate and EmailNotification)."""
    root = {
        "table": "templatelinks",
        "page": TEMPLATE,
        "recursive": True,
        "range": [0, backlinks],
        **new_root_job_params(f"htmlCacheUpdate:templatelinks:{TEMPLATE}", now),
    }
    specs = [JobSpecification("htmlCacheUpdate", root)]
    specs += [
        JobSpecification("refreshLinks", {"title": f"Page {n}", "causeAction": "edit", "causeAgent": f"Editor{edit}"})
        for n in range(pages)
    ]
    specs += [
        JobSpecification(
            "enotifNotify", {"recipient": f"watcher{n}@example.org", "page": TEMPLATE, "editor": f"Editor{edit}"}
        )
        for n in range(watchers)
    ]
    return specs


def run_demo(
    declaration: Declaration,
    *,
    seed: int = 7,
    backlinks: int = 100_000,
    pages: int = 150,
    watchers: int = 40,
    on_progress: Callable[[int], None] | None = None,
) -> DemoReport:
    """Run the story on an embedded AWS and summarise it.

    Raises:
        ConfigError: ``declaration`` lacks one of the story's types.
    """
    missing = missing_types(declaration)
    if missing:
        raise ConfigError(
            declaration.source,
            "types",
            f"the demo pushes {', '.join(DEMO_TYPES)}; not declared: {', '.join(missing)}"
            " (leave out --config to run it on its own declaration)",
        )
    started = time.perf_counter()
    clock = VirtualClock(time.time())
    with LocalStack(declaration, clock=clock, seed=seed) as stack:
        pushed = EnqueueCounter(stack.sqs)
        group = stack.queue_group(DOMAIN)
        first_edit = clock.now()
        batched = _batched(declaration)
        edits: list[str] = []
        for edit in range(3):
            # Keep the runners busy until the next edit comes in.
            stack.drain(until=first_edit + edit * EDIT_GAP_S, on_poll=on_progress, parallel=True, batch_s=batch_s)
            root, *others = edit_jobs(edit, clock.now(), backlinks=backlinks, pages=pages, watchers=watchers)
            if batched:  # the edit's root is a batch, its leaves join it: editReached runs after the last
                reached = JobSpecification(REACHED, {"edit": edit, "pages": backlinks})
                with group.batch(on_complete=reached, description=f"edit {edit} of {TEMPLATE}") as batch:
                    batch.push(root)
                edits.append(batch.id)
            group.push(others if batched else [root, *others])
        digest = JobSpecification(
            "enotifNotify",
            {"recipient": "digest@example.org", "page": "Weekly digest", "editor": "jobkit"},
            delay=3600,
        )
        group.push([JobSpecification("refreshLinks", {"title": "Module:Broken", "causeAction": "edit"}), digest])
        stack.drain(on_poll=on_progress, parallel=True, batch_s=batch_s)
        reasons = [_reason(m) for queue in declaration.queues for m in stack.dead_letters(queue)]
        summaries = summarize(stack.results.results, pushed.by_type, DEMO_TYPES)
        delayed = _delayed(stack.results.results, digest.id)
        reached_lines = [_reached(group, batch_id) for batch_id in edits]
    return DemoReport(summaries, reasons, delayed, time.perf_counter() - started, declaration.source, reached_lines)


def _batched(declaration: Declaration) -> bool:
    """Whether the declaration batches the edits (the demo's own does; another may not)."""
    reached = declaration.types.get(REACHED)
    return declaration.types["htmlCacheUpdate"].batches and reached is not None and reached.batch_callback


def _reached(group: Any, batch_id: str) -> str:
    """What an edit's editReached job said (its status's result), or why there is nothing."""
    from jobkit.batches.control import callback_spec

    record = group.batch_status(batch_id)
    if record is None or "on_complete" not in record.fired:
        return f"batch {batch_id}: not ended ({record.counts.pending if record else '?'} pending)"
    status = group.status(REACHED, callback_spec(record, "on_complete").id)
    if status is None or status.result is None:
        return f"batch {batch_id}: ended; its {REACHED} job has not run"
    import json

    return str(json.loads(status.result)["line"])


def _delayed(results: Sequence[RecordResult], job_id: str) -> list[str]:
    """How the job delayed an hour went: hops until the release, then the run."""
    lines = []
    hops = Counter(r.job_id for r in results if r.outcome is Outcome.DELAYED and r.job_id == job_id)
    for job_id, count in hops.items():
        runs = [r for r in results if r.job_id == job_id and r.ran]
        if runs and runs[0].started_at is not None and runs[0].pickup_delay_ms is not None:
            lines.append(
                f"{runs[0].job_type} {job_id}: re-enqueued {count} times until its release, "
                f"then picked up {runs[0].pickup_delay_ms:,.0f} ms after it"
            )
    return lines


def summarize(results: Sequence[RecordResult], pushed: Counter[str], job_types: Sequence[str]) -> list[TypeSummary]:
    """Per type: pushed (as SQS saw it), and each job's final outcome."""
    final: dict[str, Outcome] = {}
    for result in results:
        if result.job_id is None or not result.outcome.is_final:
            continue
        if final.get(result.job_id) is not Outcome.SUCCEEDED:  # a job that ran once stays "run"
            final[result.job_id] = result.outcome
    type_of = {r.job_id: r.job_type for r in results if r.job_id is not None}
    summaries = []
    for job_type in job_types:
        tally = Counter(o.tally for job_id, o in final.items() if type_of[job_id] == job_type)
        delays = sorted(
            r.pickup_delay_ms
            for r in results
            if r.job_type == job_type and r.pickup_delay_ms is not None and r.attempt == 1
        )
        summaries.append(
            TypeSummary(
                job_type=job_type,
                pushed=pushed.get(job_type, 0),
                tally={column: tally[column] for column in Outcome.tallies()},
                pickup_p50_ms=_percentile(delays, 50),
                pickup_p95_ms=_percentile(delays, 95),
            )
        )
    return summaries


def _reason(message: Mapping[str, Any]) -> str:
    attributes = message.get("MessageAttributes") or {}
    assert isinstance(attributes, dict)

    def value(name: str) -> str:
        return str(attributes.get(name, {}).get("StringValue", "?"))

    return f"{value('JobType')}: {value('jobkit.reason')} after {value('jobkit.attempts')} attempts: " + (
        f"{value('jobkit.errorClass')}: {value('jobkit.error')}"
    )


def _percentile(values: Sequence[float], pct: int) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def print_report(report: DemoReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="jobkit demo: three edits of a widely used template")
    table.add_column("type", no_wrap=True, min_width=15)
    # the columns this run has: an outcome no job of the demo had is left out
    tallies = [c for c in Outcome.tallies() if c == "run" or any(s.tally[c] for s in report.summaries)]
    for column in ("pushed", *tallies, "p50 pickup", "p95 pickup"):
        table.add_column(column, justify="right", no_wrap=True)
    for s in report.summaries:
        counts = [f"{s.tally[column]:,}" for column in tallies]
        table.add_row(s.job_type, f"{s.pushed:,}", *counts, _ms(s.pickup_p50_ms), _ms(s.pickup_p95_ms))
    console = Console(width=max(110, Console().width))
    console.print(table)
    for reason in report.dead_letter_reasons[:SHOWN_DEAD_LETTERS]:
        console.print(f"dead letter: {reason}")
    if len(report.dead_letter_reasons) > SHOWN_DEAD_LETTERS:
        console.print(f"... and {len(report.dead_letter_reasons) - SHOWN_DEAD_LETTERS:,} more dead letters")
    for line in report.delayed:
        console.print(f"delayed an hour: {line}")
    for line in report.reached:
        console.print(f"batch: {line}")
    verdict = "[green]balances[/]" if report.balances else "[red]DOES NOT BALANCE[/]"
    console.print(f"pushed = {' + '.join(tallies)}: {verdict}")
    console.print(f"finished in {report.wall_s:.1f} s wall time on the embedded AWS (moto)")
    own = Path(report.source).resolve() == DECLARATION.resolve() if report.source else False
    where = "the demo's own declaration, shipped with jobkit" if own else "the declaration"
    console.print(f"ran on {where}: {report.source}")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"
