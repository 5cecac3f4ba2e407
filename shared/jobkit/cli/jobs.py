"""``jobkit push`` and ``jobkit job``: one job, pushed by hand or looked up."""

from __future__ import annotations

import json
from pathlib import Path

import click

from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig


@click.command(cls=OpsCommand)
@click.argument("job_type", metavar="TYPE")
@click.option(
    "--params",
    default="{}",
    show_default=True,
    help="The job's params, a JSON object; @FILE reads it from a file, - (or @-) from stdin.",
)
@click.option("--domain", default=None, help="The domain (tenant) the job belongs to.")
@click.option("--delay", type=click.FloatRange(min=0), default=None, help="Run no earlier than this many seconds.")
@click.option("--priority", default=None, metavar="LANE", help="Push it to this priority lane of its queue.")
@ops_command
def push(
    config: CliConfig,
    output: Output,
    job_type: str,
    params: str,
    domain: str | None,
    delay: float | None,
    priority: str | None,
) -> None:
    """Enqueue one job by hand, through the push SDK.

    Params too big for a command line can come from a file (--params @params.json)
    or from stdin (--params -)."""
    from rich.text import Text

    from jobkit.ops import push_job

    group, body = config.queue_group(), read_params(params)
    job_id = push_job(group, job_type, body, domain=domain, delay_s=delay, priority=priority)
    shown = {"job_id": job_id, "type": job_type, "domain": domain, "priority": priority}
    output.show(shown, lambda: Text(f"pushed {job_type} {job_id}" + (f" to lane {priority}" if priority else "")))


@click.command(cls=OpsCommand)
@click.argument("job_id", metavar="ID")
@click.option("--type", "job_type", default=None, help="Only this job type (default: every declared type).")
@click.option("--domain", default=None, help="Only this domain (default: every domain).")
@click.option("--no-domain", is_flag=True, help="Only the job without a domain.")
@ops_command
def job(
    config: CliConfig, output: Output, job_id: str, job_type: str | None, domain: str | None, no_domain: bool
) -> None:
    """A job's status (types with track_status), failure records and final attempt.
    An ID used in several types or domains is several jobs: each is shown."""
    from jobkit.ops import ANY_DOMAIN, job_report, views

    if domain is not None and no_domain:
        raise click.UsageError("give --domain or --no-domain, not both")
    wanted = None if no_domain else (domain if domain is not None else ANY_DOMAIN)
    report = job_report(config.records, config.declaration, job_id, job_type=job_type, domain=wanted)
    if not report.found:
        raise click.ClickException(report.not_found(job_type, wanted))
    output.show(report.to_json(), lambda: views.job_view(report))


def read_params(value: str) -> str:
    """The JSON text of ``--params``: the value itself, or what ``@FILE``, or
    ``-`` or ``@-`` (stdin), holds, checked to be JSON (the push SDK checks the rest).

    Raises:
        click.ClickException: the file cannot be read, or it (or stdin) is not
            UTF-8 JSON; one line that names the source.
    """
    if value in ("-", "@-"):
        source = "stdin"
        with click.open_file("-", "rb") as stdin:  # stays open
            data: bytes = stdin.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise click.ClickException(f"--params {value}: stdin is not UTF-8 text: {exc.reason}") from exc
    elif value.startswith("@"):
        source = value[1:]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise click.ClickException(f"--params {value}: {source} is not UTF-8 text: {exc.reason}") from exc
        except OSError as exc:
            raise click.ClickException(f"--params {value}: cannot read {source}: {exc.strerror or exc}") from exc
    else:
        return value
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise click.ClickException(f"--params {value}: {source} is not valid JSON: {exc}") from exc
    return text
