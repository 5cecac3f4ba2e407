"""``jobkit batch``: show one batch: its counts, callbacks and what it waits for."""

from __future__ import annotations

import click

from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig


@click.command(cls=OpsCommand)
@click.argument("batch_id", metavar="ID")
@click.option("--domain", default=None, help="The domain (tenant) the batch was opened in (default: none).")
@ops_command
def batch(config: CliConfig, output: Output, batch_id: str, domain: str | None) -> None:
    """Show a batch: how many members ended each way, how many it waits for
    (and which), whether it is sealed, and which callbacks were pushed."""
    from rich.text import Text

    from jobkit.batches.report import batch_report

    report = batch_report(config.records, batch_id, domain)
    output.show(report.to_json(), lambda: Text(report.text()))
