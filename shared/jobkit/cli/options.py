"""The options the commands share, and how an ops command reads its own.

An ops command is a :class:`OpsCommand` (``@click.command(cls=OpsCommand)``)
whose function is wrapped by :func:`ops_command`: it has ``--json``,
``--config``, ``--prefix``, ``--endpoint-url`` and ``--region``, and with
``--json`` its errors are JSON too (:mod:`jobkit.cli.errors`), bad option
values included.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from jobkit.cli.errors import OptionError, clear_errors, json_error
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig

#: Where the job declaration is, for every command that reads it.
config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The job declaration (default: $JOBKIT_CONFIG, else infra/jobs.toml).",
)

#: A valid endpoint, for the messages about invalid ones: the local stack's.
ENDPOINT_EXAMPLE = "http://127.0.0.1:4566"

#: The environment variables botocore takes endpoints from, for the services
#: the ops commands use, unless ``--endpoint-url`` is given.
ENDPOINT_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_CLOUDWATCH",
    "AWS_ENDPOINT_URL_DYNAMODB",
)

_OPS_OPTIONS = (
    click.option(
        "--json",
        "as_json",
        is_flag=True,
        help='Print JSON for scripts instead of a table; an error as {"error": ..., "exit_status": 1 or 2} on stderr.',
    ),
    config_option,
    click.option("--prefix", envvar="JOBKIT_PREFIX", default=None, help="The stack's name prefix [$JOBKIT_PREFIX]."),
    click.option(
        "--endpoint-url",
        default=None,
        help=f"An AWS endpoint URL, e.g. the local stack's, {ENDPOINT_EXAMPLE} [$AWS_ENDPOINT_URL].",
    ),
    click.option("--region", default=None, help="The AWS region (default: the usual chain)."),
)


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` is not an endpoint botocore can use, or ``None`` if it is:
    it needs an ``http`` or ``https`` scheme and a host."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it has no host"
    return None


def check_endpoints(endpoint_url: str | None, environ: Mapping[str, str] | None = None) -> None:
    """Fail with one line if ``--endpoint-url``, or else an endpoint variable
    of the environment, is not a URL (botocore would raise a ValueError).

    Raises:
        OptionError: naming the option or the variable, with a valid example.
    """
    environ = os.environ if environ is None else environ
    if endpoint_url is not None:
        candidates = [("--endpoint-url", endpoint_url)]
    elif environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        candidates = []
    else:
        candidates = [(f"${name}", environ[name]) for name in ENDPOINT_VARIABLES if environ.get(name)]
    for source, url in candidates:
        problem = endpoint_problem(url)
        if problem is not None:
            raise OptionError(f"{source} {url!r} is not an endpoint URL ({problem}); e.g. {ENDPOINT_EXAMPLE}")


def _json_requested(args: list[str]) -> bool:
    """Whether ``--json`` is among the arguments (before a ``--``), for errors
    raised before the options are parsed."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


@contextmanager
def _json_errors(as_json: bool) -> Iterator[None]:
    """With ``--json``, click's errors (and a declined confirmation) as :class:`~jobkit.cli.errors.JsonError`."""
    try:
        yield
    except (click.ClickException, click.Abort) as exc:
        if as_json:
            raise json_error(exc) from exc
        raise


class OpsCommand(click.Command):
    """An ops command: with ``--json``, its errors are JSON on stderr, from
    parsing its arguments (an unknown option, a bad value) to running it."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _json_errors(_json_requested(args)):  # before parsing consumes the list
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _json_errors(bool(ctx.params.get("as_json"))):
            return super().invoke(ctx)


class OpsGroup(click.Group):
    """A group of ops commands: with ``--json``, an unknown subcommand is a JSON error too."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with _json_errors(_json_requested(args)):
            return super().make_context(info_name, args, parent, **extra)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        with _json_errors(_json_requested(args)):
            return super().resolve_command(ctx, args)


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
        check_endpoints(config.endpoint_url)
        with clear_errors():
            func(config, Output(as_json), **arguments)

    # click names a command and takes its help from the function it wraps.
    command.__name__, command.__doc__ = func.__name__, func.__doc__
    decorated: Callable[..., None] = click.pass_context(command)
    for option in reversed(_OPS_OPTIONS):
        decorated = option(decorated)
    return decorated
