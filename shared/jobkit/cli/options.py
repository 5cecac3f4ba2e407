"""The options the commands share, and how an ops command reads its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from jobkit.cli.config import CliConfig
from jobkit.cli.errors import clear_errors
from jobkit.cli.output import Output

#: Where the job declaration is, for every command that reads it.
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The job declaration (default: $JOBKIT_CONFIG, else infra/jobs.toml).",
)

_OPS_OPTIONS = (
    click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table."),
    config_option,
    click.option("--prefix", envvar="JOBKIT_PREFIX", default=None, help="The stack's name prefix [$JOBKIT_PREFIX]."),
    click.option("--endpoint-url", default=None, help="An AWS endpoint, e.g. the local stack's [$AWS_ENDPOINT_URL]."),
    click.option("--region", default=None, help="The AWS region (default: the usual chain)."),
)


def ops_command(func: Callable[..., None]) -> Callable[..., None]:
    """The options every ops command has; calls ``func(config, output, **arguments)``."""

    def command(
        ctx: click.Context,
        as_json: bool,
        config_path: Path | None,
        prefix: str | None,
        endpoint_url: str | None,
        region: str | None,
        **arguments: Any,
    ) -> None:
        base = ctx.find_object(CliConfig) or CliConfig()
        config = base.overridden(config_path=config_path, prefix=prefix, endpoint_url=endpoint_url, region=region)
        with clear_errors():
            func(config, Output(as_json), **arguments)

    # click names a command and takes its help from the function it wraps.
    command.__name__, command.__doc__ = func.__name__, func.__doc__
    decorated: Callable[..., None] = click.pass_context(command)
    for option in reversed(_OPS_OPTIONS):
        decorated = option(decorated)
    return decorated
