"""``jobkit queues`` and ``jobkit top``: is every queue, and every job type, keeping up?"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

import click

from jobkit.cli.config import CliConfig
from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output, console

if TYPE_CHECKING:
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
@ops_command
def top(config: CliConfig, output: Output, once: bool, interval: float, window: int) -> None:
    """A live view per type: rates in and out, pickup delay, backlog, DLQ; the worst line stands out.

    With --json, one JSON document per frame (indented, as every command's),
    a stream that jq reads as it comes."""
    from jobkit.ops import top_snapshot, views

    def frame() -> TopSnapshot:
        return top_snapshot(
            config.sqs,
            config.cloudwatch,
            config.declaration,
            config.directory,
            now=config.now(),
            window_s=window * 60,
        )

    if once or output.as_json:
        try:
            while True:  # JSON: one document per frame
                snapshot = frame()
                output.show(snapshot.to_json(), partial(views.top_table, snapshot))
                if once:
                    return
                time.sleep(interval)
        except KeyboardInterrupt:
            return
    from rich.live import Live

    with Live(views.top_table(frame()), console=console(), auto_refresh=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(views.top_table(frame()), refresh=True)
        except KeyboardInterrupt:
            return
