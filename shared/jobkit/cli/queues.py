"""``jobkit queues`` and ``jobkit top``: is every queue, and every job type, keeping up?
And ``jobkit top --by domain``: which domains keep a type busy?"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import click

from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output, console
from jobkit.ops.config import CliConfig

if TYPE_CHECKING:
    from rich.console import RenderableType

    from jobkit.ops import TopSnapshot


@click.command(cls=OpsCommand)
@ops_command
def queues(config: CliConfig, output: Output) -> None:
    """Per queue: queued, in flight, delayed and dead messages, and the oldest one's age."""
    from jobkit.ops import queue_summaries, views

    report = queue_summaries(config.sqs, config.cloudwatch, config.declaration, config.directory, now=config.now())
    output.show(report.to_json(), lambda: views.queues_table(report))


@click.command(cls=OpsCommand)
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@click.option("--interval", default=10.0, show_default=True, type=click.FloatRange(min=1), help="Seconds per frame.")
@click.option("--window", default=5, show_default=True, type=click.IntRange(1, 180), help="Minutes of metrics.")
@click.option(
    "--by",
    "by",
    type=click.Choice(["type", "domain"]),
    default="type",
    show_default=True,
    help="A line per job type, or per busiest domain of each type (from the Contributor Insights rules).",
)
@click.option("--type", "job_type", metavar="TYPE", help="With --by domain: only this type's domains.")
@click.option(
    "--limit", default=10, show_default=True, type=click.IntRange(1, 100), help="With --by domain: domains per type."
)
@ops_command
def top(
    config: CliConfig,
    output: Output,
    once: bool,
    interval: float,
    window: int,
    by: str,
    job_type: str | None,
    limit: int,
) -> None:
    """A live view per type: rates in and out, pickup delay, backlog, DLQ; the worst line stands out.

    With --by domain, per type its busiest domains: jobs that succeeded, per
    minute, and their share of the type's (no metric has a domain dimension:
    the figures come from the stack's Contributor Insights rules).

    With --json, one JSON document per frame (indented, as every command's),
    a stream that jq reads as it comes."""
    if by == "type" and job_type is not None:
        raise click.BadParameter("only with --by domain", param_hint="--type")
    if job_type is not None and job_type not in config.declaration.types:
        raise click.BadParameter(f"no type {job_type!r} is declared", param_hint="--type")
    frame: Callable[[], tuple[dict[str, Any], Callable[[], RenderableType]]]
    if by == "domain":
        frame = partial(_domains_frame, config, window * 60, job_type, limit)
    else:
        frame = partial(_types_frame, config, window * 60)

    if once or output.as_json:
        try:
            while True:  # JSON: one document per frame
                output.show(*frame())
                if once:
                    return
                time.sleep(interval)
        except KeyboardInterrupt:
            return
    from rich.live import Live

    with Live(frame()[1](), console=console(), auto_refresh=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(frame()[1](), refresh=True)
        except KeyboardInterrupt:
            return


def _types_frame(config: CliConfig, window_s: int) -> tuple[dict[str, Any], Callable[[], RenderableType]]:
    from jobkit.ops import top_snapshot, views

    snapshot: TopSnapshot = top_snapshot(
        config.sqs, config.cloudwatch, config.declaration, config.directory, now=config.now(), window_s=window_s
    )
    return snapshot.to_json(), partial(views.top_table, snapshot)


def _domains_frame(
    config: CliConfig, window_s: int, job_type: str | None, limit: int
) -> tuple[dict[str, Any], Callable[[], RenderableType]]:
    from jobkit.ops import views
    from jobkit.ops.domains import busiest_domains

    report = busiest_domains(
        config.cloudwatch,
        config.logs,
        config.declaration,
        now=config.now(),
        window_s=window_s,
        job_type=job_type,
        limit=limit,
    )
    return report.to_json(), partial(views.domains_table, report)
