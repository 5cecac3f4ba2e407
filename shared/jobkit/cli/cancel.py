"""``jobkit cancel``: cancel one job, or every job of a type pushed before a time."""

from __future__ import annotations

import click

from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig


@click.command(cls=OpsCommand)
@click.argument("job_type", metavar="TYPE")
@click.argument("job_id", metavar="[ID]", required=False)
@click.option("--all", "every", is_flag=True, help="Every job of TYPE pushed at or before --before (default: now).")
@click.option("--before", default=None, help="With --all: epoch seconds, or an ISO 8601 time (UTC unless it says).")
@click.option("--domain", default=None, help="The domain (tenant) of the jobs (default: the jobs without one).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@ops_command
def cancel(
    config: CliConfig,
    output: Output,
    job_type: str,
    job_id: str | None,
    every: bool,
    before: str | None,
    domain: str | None,
    yes: bool,
) -> None:
    """Cancel a job of a cancellable type: if it has not started it never runs
    (it ends `cancelled`); a running job stops only if it checks self.cancelled().
    With --all, every job of TYPE pushed before a time, without listing them."""
    from rich.text import Text

    from jobkit.ops.cancel import cancel_all, cancel_one, operator, parse_time
    from jobkit.status.control import JobControl

    if every == (job_id is not None):
        raise click.UsageError("give a job ID, or --all (not both)")
    if before is not None and not every:
        raise click.UsageError("--before goes with --all")
    cutoff = parse_time(before) if before is not None else None
    where = f" in domain {domain!r}" if domain is not None else " without a domain"
    what = (
        f"{job_type} {job_id}{where}"
        if job_id is not None
        else f"every {job_type} job{where} pushed until " + (before or "now")
    )
    if not yes:
        click.confirm(f"Cancel {what}?", abort=True, err=True)
    config.now()  # the local stack's clock, if the endpoint is one
    control = JobControl(config.declaration, config.records, config.clock)
    by = operator()
    if job_id is not None:
        report = cancel_one(control, job_type, job_id, domain, by)
    else:
        report = cancel_all(control, job_type, domain, cutoff, by)
    output.show(report.to_json(), lambda: Text(report.text()))
