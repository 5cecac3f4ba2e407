"""Readable views of the ops results: rich tables for people.

Scripts use each result's ``to_json()`` instead (``--json``). Missing figures
show as ``-``. Every value is plain text, never rich markup: a job ID or an
error message may contain brackets.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table
from rich.text import Text

from jobkit.ops.dead_letters import DeadLetter, DeadLetterListing
from jobkit.ops.dlq import RemovalReport
from jobkit.ops.jobs import JobReport
from jobkit.ops.queues import QueuesReport
from jobkit.ops.redrive import RedriveReport
from jobkit.ops.top import TopSnapshot
from jobkit.records import FailureRecord

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
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _count(value: int, *, bad: bool = False) -> Text:
    return Text(f"{value:,}", style="bold red" if bad and value else "")


def queues_table(report: QueuesReport) -> Table:
    table = Table(title="jobkit queues", caption=_caption([report.metrics_error] if report.metrics_error else []))
    for column in ("queue", "types", "queued", "in flight", "delayed", "dead", "oldest"):
        table.add_column(column, justify="left" if column in ("queue", "types") else "right")
    for q in report.queues:
        _row(
            table,
            q.sqs_name,
            ", ".join(q.types),
            _count(q.queued),
            _count(q.in_flight),
            _count(q.delayed),
            _count(q.dead_lettered, bad=True),
            duration(q.oldest_age_s),
        )
    return table


def top_table(snapshot: TopSnapshot) -> Table:
    title = f"jobkit top: last {snapshot.window_s // 60} min, at {timestamp(snapshot.at)}"
    table = Table(title=title, caption=_caption(snapshot.notes))
    columns = (
        "type",
        "queue",
        "backlog",
        "in/min",
        "out/min",
        "failed/min",
        "p50 pickup",
        "p95 pickup",
        "oldest",
        "DLQ",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("type", "queue") else "right")
    worst = snapshot.worst
    for line in snapshot.lines:
        _row(
            table,
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
    return table


def dead_letters_table(listing: DeadLetterListing, now: float) -> Table:
    shown = len(listing.items)
    caption = f"{shown} shown; the DLQ holds about {listing.approximate_total:,}"
    if listing.limited:
        caption += " (limit reached: use --limit)"
    table = Table(title=Text(f"dead letters: {listing.scope.describe()}"), caption=Text(caption))
    for column in ("job id", "type", "domain", "age", "tries", "reason", "last error"):
        table.add_column(column, justify="right" if column in ("age", "tries") else "left", overflow="fold")
    for dead in listing.items:
        _row(
            table,
            dead.job_id or MISSING,
            dead.job_type or MISSING,
            dead.domain or MISSING,
            duration(dead.age_s(now)),
            MISSING if dead.attempts is None else str(dead.attempts),
            dead.reason,
            _short(dead.last_error)
            if dead.parse_error is None
            else f"{_short(dead.last_error)} | body: {dead.body_start!r}",
        )
    return table


def dead_letter_detail(dead: DeadLetter, now: float) -> RenderableType:
    facts = _facts(
        {
            "message id": dead.message_id,
            "job id": dead.job_id or MISSING,
            "type": dead.job_type or MISSING,
            "domain": dead.domain or MISSING,
            "reason": dead.reason,
            "last error": dead.last_error or MISSING,
            "attempts": MISSING if dead.attempts is None else str(dead.attempts),
            "dead-lettered": timestamp(dead.dead_lettered_at),
            "age": duration(dead.age_s(now)),
            "enqueued": timestamp(dead.spec.enqueued_at if dead.spec else None),
            "source queue": dead.attributes.get("jobkit.sourceQueue", MISSING),
            "not a valid spec": dead.parse_error or "",
        }
    )
    body = json.dumps(dead.data, indent=2, ensure_ascii=False) if dead.data is not None else dead.body
    return Group(facts, Text("body", style="bold"), Text(body), *_failures(dead.failures))


def dead_letter_details(items: list[DeadLetter], now: float) -> RenderableType:
    return Group(*(dead_letter_detail(dead, now) for dead in items))


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
    status = report.status
    if status is None:
        parts.append(Text(f"job {report.job_id}: no status record (its type does not track status)", style="dim"))
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
                    "result": status.result or MISSING,
                    "error": status.error or "",
                    "note": status.note or "",
                }
            )
        )
    parts.extend(_failures(report.failures))
    return Group(*parts)


def redrive_text(report: RedriveReport) -> Text:
    return Text(_redrive_lines(report))


def _redrive_lines(report: RedriveReport) -> str:
    if report.mode == "native":
        return (
            f"started a move task from {report.scope.dlq_name} to {report.scope.sqs_name}"
            f" (about {report.approximate:,} messages); task handle {report.task_handle}"
        )
    if report.mode == "dry_run":
        ids = ", ".join(d.job_id or d.message_id for d in report.matched)
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
        parts += [Text(heading, style="bold red"), Text(record.traceback, style="dim")]
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
