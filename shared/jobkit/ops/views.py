"""Readable views of the ops results: rich tables for people.

Scripts use each result's ``to_json()`` instead (``--json``). Missing figures
show as ``-``. Every value is plain text, never rich markup: a job ID or an
error message may contain brackets.

The tables are laid out for the width they are printed at (a
:class:`~jobkit.ops.fitted_table.FittedTable`), down to an 80-column terminal: names and counts are never
broken, long text wraps, and at narrow widths headers get shorter and the
least useful columns are left out (the caption says which; ``--json`` has
everything).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table
from rich.text import Text

from jobkit.ops.bodies import safe_text
from jobkit.ops.dead_letters import DeadLetter, DeadLetterListing
from jobkit.ops.dead_params import FetchedParams
from jobkit.ops.dlq import RemovalReport
from jobkit.ops.domains import DomainsReport
from jobkit.ops.fitted_table import Column, FittedTable
from jobkit.ops.jobs import JobMatch, JobReport
from jobkit.ops.queues import QueuesReport
from jobkit.ops.redrive import RedriveReport
from jobkit.ops.top import TopSnapshot
from jobkit.records import FailureRecord, FinalAttempt

MISSING = "-"
ERROR_CHARS = 80


def duration(seconds: float | None) -> str:
    """``45s``, ``3m20s``, ``2h05m``, ``3d04h``."""
    if seconds is None:
        return MISSING
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f}s" if seconds >= 1 else f"{seconds:.1f}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def milliseconds(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.0f} ms"


def rate(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.1f}"


def timestamp(epoch: float | None) -> str:
    if epoch is None:
        return MISSING
    try:
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):  # no calendar has this time
        return f"{epoch!r} (not a time)"


def _count(value: int, *, bad: bool = False) -> Text:
    return Text(f"{value:,}", style="bold red" if bad and value else "")


def queues_table(report: QueuesReport) -> FittedTable:
    table = FittedTable(
        (
            Column("queue"),
            Column("types", kind="words"),
            Column("queued", justify="right"),
            Column("in flight", justify="right", drop=2),
            Column("delayed", justify="right", drop=3),
            Column("dead", justify="right"),
            Column("oldest", justify="right", drop=1),
        ),
        title="jobkit queues",
        caption=_caption([report.metrics_error] if report.metrics_error else []),
    )
    for q in report.queues:
        table.add_row(
            q.sqs_name,
            ", ".join(q.types),
            _count(q.queued),
            _count(q.in_flight),
            _count(q.delayed),
            _count(q.dead_lettered, bad=True),
            duration(q.oldest_age_s),
        )
    return table


def top_table(snapshot: TopSnapshot) -> FittedTable:
    title = f"jobkit top: last {snapshot.window_s // 60} min, at {timestamp(snapshot.at)}"
    table = FittedTable(
        (
            Column("type"),
            Column("queue", kind="words", drop=5),
            Column("backlog", justify="right"),
            Column("in/min", justify="right", short="in", drop=3),
            Column("out/min", justify="right", short="out", drop=2),
            Column("failed/min", justify="right", short="failed", drop=1),
            Column("p50 pickup", justify="right", short="p50", drop=4),
            Column("p95 pickup", justify="right", short="p95"),
            Column("oldest", justify="right"),
            Column("DLQ", justify="right"),
        ),
        title=title,
        caption=_caption(snapshot.notes),
        legend="in, out, failed: per minute; p50, p95: pickup delay",
    )
    worst = snapshot.worst
    for line in snapshot.lines:
        table.add_row(
            line.job_type,
            line.queue + (" (shared)" if line.shared_queue else ""),
            _count(line.backlog),
            rate(line.in_per_min),
            rate(line.out_per_min),
            rate(line.failed_per_min),
            milliseconds(line.pickup_p50_ms),
            milliseconds(line.pickup_p95_ms),
            duration(line.oldest_age_s),
            _count(line.dead_lettered, bad=True),
            style="bold red reverse" if line.job_type == worst else None,
        )
        for lane in line.lanes:  # a queue with priority lanes: each lane below its type
            table.add_row(
                f"  lane {lane.priority or 'default'}",
                "",
                _count(lane.backlog),
                "",
                "",
                "",
                "",
                milliseconds(lane.pickup_p95_ms),
                duration(lane.oldest_age_s),
                _count(lane.dead_lettered, bad=True),
                style="dim",
            )
    return table


def domains_table(report: DomainsReport) -> FittedTable:
    """``jobkit top --by domain``: per type, its busiest domains, busiest first."""
    title = f"jobkit top --by domain: last {report.window_s // 60} min, at {timestamp(report.at)}"
    table = FittedTable(
        (
            Column("type"),
            Column("domain", kind="text", floor=16),
            Column("run/min", justify="right", short="run"),
            Column("jobs", justify="right", drop=2),
            Column("share", justify="right", drop=1),
        ),
        title=title,
        caption=_caption([f"from {report.source}", *report.notes]),
        legend="run: jobs that succeeded, per minute; share: of the type's jobs with a domain",
    )
    for line in report.lines:
        table.add_row(
            line.job_type,
            line.domain,
            rate(line.per_min),
            f"{line.jobs:,.0f}",
            MISSING if line.share is None else f"{line.share:.0%}",
        )
    return table


def dead_letters_table(listing: DeadLetterListing, now: float) -> FittedTable:
    shown = len(listing.items)
    caption = f"{shown} shown; the DLQ holds about {listing.approximate_total:,}"
    if listing.limited:
        caption += " (limit reached: use --limit)"
    caption += "\nreason and last error: verified (jobs table or the tool's own check); claims: the message's word"
    table = FittedTable(
        (
            Column("job id", kind="text", floor=18),
            Column("type", kind="words"),
            Column("domain", drop=3),
            Column("age", justify="right", drop=1),
            Column("tries", justify="right", drop=2),
            Column("reason"),
            Column("last error", kind="text", floor=16, lines=3),
            Column(CLAIMED, kind="text", floor=16, lines=3, drop=4),
        ),
        title=Text(f"dead letters: {listing.scope.describe()}"),
        caption=Text(caption),
    )
    for dead in listing.items:
        claimed = dead.claimed
        table.add_row(
            _identity(dead),
            _type(dead),
            dead.domain or MISSING,
            duration(dead.age_s(now)),
            MISSING if dead.attempts is None else str(dead.attempts),
            dead.reason,
            _short(dead.last_error) if dead.readable else f"{_short(dead.last_error)} | body: {dead.body_start!r}",
            _short(claimed.summary) if claimed is not None else MISSING,
        )
    return table


#: The column and the label of what a message's attributes claim.
CLAIMED = "claims (unverified)"


def dead_letter_detail(dead: DeadLetter, now: float, fetched: FetchedParams | None = None) -> RenderableType:
    claimed = dead.claimed
    facts = _facts(
        {
            "message id": dead.message_id,
            "copy of": dead.original_message_id or "",  # the message ID the runner logged
            "job id": dead.job_id or "- (the body is not a job)",
            "type": _type(dead),
            "domain": dead.domain or MISSING,
            "correlation id": dead.correlation_id or MISSING,  # the request that pushed it (find its lines by it)
            "reason": f"{dead.reason} ({'verified' if dead.verified else 'not verified'})",
            "why": dead.explanation,
            "last error": dead.last_error or MISSING,
            "attempts": MISSING if dead.attempts is None else str(dead.attempts),
            "dead-lettered": timestamp(dead.dead_lettered_at),
            "age": duration(dead.age_s(now)),
            "enqueued": timestamp(dead.spec.enqueued_at if dead.spec else None),
            "source queue": dead.source_queue or MISSING,
            "not a job": dead.parse_error or "",
            "final attempt": _final(dead.final),
            CLAIMED: claimed.summary if claimed is not None else "",
        }
    )
    body = json.dumps(dead.data, indent=2, ensure_ascii=False) if dead.data is not None else safe_text(dead.body)
    return Group(
        facts, Text("body", style="bold"), Text(body), *_large_params(dead, fetched), *_failures(dead.failures)
    )


def _large_params(dead: DeadLetter, fetched: FetchedParams | None) -> list[RenderableType]:
    ref = dead.params_ref
    if ref is None:
        return []
    title = Text(f"params (in the payload bucket, {ref.size} bytes)", style="bold")
    if fetched is None:
        return [title, Text("not fetched: --params fetches them")]
    if fetched.problem is not None:
        return [title, Text(f"could not fetch them: {fetched.problem}")]
    return [title, Text(json.dumps(fetched.params, indent=2, ensure_ascii=False))]


def dead_letter_details(
    items: list[DeadLetter], now: float, fetched: Sequence[FetchedParams | None] = ()
) -> RenderableType:
    found = list(fetched) or [None] * len(items)
    return Group(*(dead_letter_detail(dead, now, f) for dead, f in zip(items, found, strict=True)))


def _identity(dead: DeadLetter) -> str:
    return dead.job_id if dead.job_id is not None else f"unreadable: message {dead.message_id}"


def _type(dead: DeadLetter) -> str:
    shown = dead.job_type or MISSING
    return shown if dead.claimed_type is None else f"{shown} (claims {dead.claimed_type})"


def _final(final: FinalAttempt | None) -> str:
    if final is None:
        return ""
    outcome = f"succeeded {timestamp(final.succeeded_at)}" if final.succeeded_at is not None else "did not succeed"
    return f"attempt {final.attempt} (the last allowed), started {timestamp(final.started_at)}, {outcome}"


def redrive_progress(console: Console, *, disable: bool) -> Progress:
    """A progress bar of messages sent back (the total is unknown until the DLQ is read)."""
    return Progress(
        SpinnerColumn(),
        TextColumn("redriving"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
        disable=disable,
    )


def job_view(report: JobReport) -> RenderableType:
    parts: list[RenderableType] = []
    if len(report.matches) > 1:
        parts.append(Text(f"job ID {report.job_id} is used by {len(report.matches)} jobs:", style="bold"))
    for match in report.matches:
        parts.extend(_job_match(match))
    return Group(*parts)


def _job_match(match: JobMatch) -> list[RenderableType]:
    where = f"{match.job_type} {match.job_id}" + (f" in {match.domain}" if match.domain else " (no domain)")
    parts: list[RenderableType] = []
    status = match.status
    if status is None:
        parts.append(Text(f"{where}: no status record (its type does not track status)", style="dim"))
        if match.correlation_id is not None:
            parts.append(Text(f"{where}: correlation id {match.correlation_id}"))
    else:
        state = str(status.state) + (" (will retry)" if status.will_retry else "")
        parts.append(
            _facts(
                {
                    "job id": status.job_id,
                    "type": status.job_type,
                    "domain": status.domain or MISSING,
                    "state": state,
                    "attempt": str(status.attempt),
                    "started": timestamp(status.started_at),
                    "finished": timestamp(status.finished_at),
                    "progress": MISSING if status.progress is None else f"{status.progress:g}%",
                    "result": safe_text(status.result) if status.result else MISSING,
                    "error": safe_text(status.error or ""),
                    "note": safe_text(status.note or ""),
                    "correlation id": match.correlation_id or MISSING,  # the request that pushed it
                }
            )
        )
    if match.final is not None:
        parts.append(Text(f"{where}: {_final(match.final)}"))
    parts.extend(_failures(match.failures))
    return parts


def redrive_text(report: RedriveReport) -> Text:
    return Text(_redrive_lines(report))


def _redrive_lines(report: RedriveReport) -> str:
    if report.mode == "native":
        return (
            f"started a move task from {report.scope.dlq_name} to {report.scope.sqs_name}"
            f" (about {report.approximate:,} messages); task handle {report.task_handle}"
        )
    if report.mode == "dry_run":
        ids = ", ".join(d.job_id or f"message {d.message_id}" for d in report.matched)
        return f"dry run: would send {len(report.matched)} message(s) back to {report.scope.sqs_name}: {ids}"
    lines = [f"sent {report.moved} message(s) back to {report.scope.sqs_name} (matched {len(report.matched)})"]
    if report.native_unavailable:
        lines.append(f"(copied one by one: {report.native_unavailable})")
    lines += [f"not sent, still in the DLQ: {m}: {e}" for m, e in report.not_sent]
    lines += [f"sent but not deleted, now in both queues: {m}" for m in report.not_deleted]
    return "\n".join(lines)


def removal_text(report: RemovalReport) -> Text:
    if report.mode == "purge_queue":
        return Text(f"purged {report.scope.dlq_name} (about {report.removed:,} messages)")
    return Text(f"deleted {report.removed} message(s) from {report.scope.dlq_name}")


def _failures(records: list[FailureRecord] | tuple[FailureRecord, ...]) -> list[RenderableType]:
    parts: list[RenderableType] = []
    for record in records:
        heading = f"failed attempt {record.attempt} at {timestamp(record.at)}: {record.error_class}: {record.message}"
        if record.dead_letter_reason:
            heading += f" (dead-lettered: {record.dead_letter_reason})"
        parts += [Text(safe_text(heading), style="bold red"), Text(safe_text(record.traceback), style="dim")]
    return parts


def _facts(rows: dict[str, str]) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in rows.items():
        if value:
            _row(table, name, value)
    return table


def _short(text: str | None) -> str:
    if text is None:
        return MISSING
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def _caption(notes: list[str]) -> Text | None:
    return Text("\n".join(notes)) if notes else None


def _row(table: Table, *cells: str | Text, style: str | None = None) -> None:
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells), style=style)
