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


@main.command()
@config_option
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("template.yaml"),
    show_default=True,
    help="Where the template goes.",
)
@click.option(
    "--extra",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("infra/template-extra.yaml"),
    show_default=True,
    help="Your own resources, merged in (used if it exists).",
)
@click.option("--check", is_flag=True, help="Exit 1 if the file differs from what would be generated.")
def template(config_path: Path | None, output: Path, extra: Path, check: bool) -> None:
    """Render template.yaml (SAM) from the job declaration."""
    from jobkit.template import load_extra, render

    try:
        text = render(load_declaration(config_path), load_extra(extra))
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    if check:
        current = output.read_text() if output.exists() else ""
        if current != text:
            raise click.ClickException(f"{output} is stale: run `jobkit template` and commit the result")
        click.echo(f"{output} is up to date")
        return
    output.write_text(text)
    click.echo(f"wrote {output}")


if __name__ == "__main__":  # pragma: no cover
    main()
