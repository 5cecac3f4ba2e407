"""The ``jobkit`` command line: a thin shell over jobkit's library functions."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from jobkit.config import load_declaration
from jobkit.errors import JobKitError


@click.group()
@click.version_option(package_name="jobkit")
def main() -> None:
    """jobkit: a serverless job queue on SQS, Lambda and DynamoDB."""


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The job declaration (default: $JOBKIT_CONFIG, else infra/jobs.toml).",
)


@main.command()
@config_option
@click.option("--seed", default=7, show_default=True, help="Seed for retry jitter.")
def demo(config_path: Path | None, seed: int) -> None:
    """Run a small realistic workload on the embedded local AWS and summarise it."""
    from jobkit.local.demo import print_summary, run_demo

    logging.basicConfig(level=logging.WARNING, format="  %(levelname)-7s %(message)s")
    try:
        summaries, wall_s = run_demo(load_declaration(config_path), seed=seed)
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    print_summary(summaries, wall_s)


if __name__ == "__main__":  # pragma: no cover
    main()
