"""``jobkit demo``: a story on the embedded local AWS, summarised."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from jobkit.core.errors import JobKitError
from jobkit.declaration.config import load_declaration


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Run the rfc story on this declaration (default: the demo's own, shipped with jobkit).",
)
@click.option(
    "--scenario",
    type=click.Choice(["rfc", "flow-control", "priorities"]),
    default="rfc",
    show_default=True,
    help="rfc: the job-queue RFC's story; flow-control: fairness, a rate limit and a debounce; priorities: urgent"
    " jobs in a lane of their own, past a backlog. Each runs on its own declaration, shipped with jobkit;"
    " --config runs rfc on another that declares htmlCacheUpdate, refreshLinks and enotifNotify.",
)
@click.option("--seed", default=7, show_default=True, help="Seed for retry jitter.")
@click.option(
    "--backlinks",
    default=100_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Pages that embed the edited template.",
)
@click.option(
    "--pages",
    default=150,
    show_default=True,
    type=click.IntRange(min=0),
    help="Pages queued for refreshLinks by each edit.",
)
@click.option(
    "--watchers", default=40, show_default=True, type=click.IntRange(min=0), help="Emails sent for each edit."
)
@click.option(
    "--noisy",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="flow-control: jobs of the noisy domain.",
)
@click.option(
    "--quiet",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="flow-control: jobs of the quiet domain.",
)
@click.option(
    "--bulk",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="priorities: jobs of the backlog, in the queue's own lane.",
)
@click.option(
    "--urgent",
    default=100,
    show_default=True,
    type=click.IntRange(min=1),
    help="priorities: jobs pushed to the high lane behind the backlog.",
)
def demo(
    config_path: Path | None,
    scenario: str,
    seed: int,
    backlinks: int,
    pages: int,
    watchers: int,
    noisy: int,
    quiet: int,
    bulk: int,
    urgent: int,
) -> None:
    """Run a story on the embedded local AWS and summarise it."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from jobkit.local.demo import print_report, run_demo
    from jobkit.local.flow_demo import run_flow_demo
    from jobkit.local.priorities_demo import run_priorities_demo

    # The report shows what failed and why; the runner's own logs would repeat it.
    logging.basicConfig(level=logging.CRITICAL)
    # flow-control and priorities print exactly their lines on stdout: their progress goes to stderr
    measured = scenario in ("flow-control", "priorities")
    console = Console(stderr=True) if measured else None
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, transient=True, console=console) as bar:
        task = bar.add_task("running jobs on the local stack", total=None)

        def progress(delivered: int) -> None:
            bar.update(task, description=f"running jobs on the local stack: {delivered:,} messages handled")

        try:
            if measured and config_path is not None:
                raise click.UsageError(f"--config applies to the rfc scenario: {scenario} runs on its own")
            if scenario == "flow-control":
                lines = run_flow_demo(noisy=noisy, quiet=quiet, seed=seed, on_progress=progress).lines()
            elif scenario == "priorities":
                lines = run_priorities_demo(bulk=bulk, urgent=urgent, seed=seed, on_progress=progress).lines()
            else:
                from jobkit.local.demo import DECLARATION

                # its own declaration and classes unless --config names another: it runs anywhere
                report = run_demo(
                    load_declaration(config_path or DECLARATION),
                    seed=seed,
                    backlinks=backlinks,
                    pages=pages,
                    watchers=watchers,
                    on_progress=progress,
                )
        except JobKitError as exc:
            raise click.ClickException(str(exc)) from exc
    if measured:
        for line in lines:
            click.echo(line)
        return
    print_report(report)
    if not report.balances:
        raise SystemExit(1)
