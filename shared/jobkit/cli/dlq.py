"""``jobkit dlq``: dead letters, listed, shown, redriven, purged and deleted."""

from __future__ import annotations

import click

from jobkit.cli.options import OpsCommand, OpsGroup, ops_command
from jobkit.cli.output import Output, console
from jobkit.ops.config import CliConfig


@click.group(cls=OpsGroup)
def dlq() -> None:
    """Dead letters: list, show, redrive, purge, delete.

    TARGET is a job type or a queue. A type with a queue of its own means its
    whole DLQ; a type on a shared queue means only the messages whose body is
    that type's; a queue name means the queue's whole DLQ, with the messages
    that are not jobs. A message ID selects its message in any TARGET of its DLQ.
    Reasons are verified (the jobs table, or the tool's own check of the body);
    a message's jobkit.* attributes are shown as unverified claims.
    """


@dlq.command(cls=OpsCommand, name="list")
@click.argument("target")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="Show at most this many.")
@ops_command
def dlq_list(config: CliConfig, output: Output, target: str, limit: int) -> None:
    """Dead letters with job ID, type, domain, age, attempts, the verified reason and error. Consumes nothing."""
    from jobkit.ops import list_dead_letters, resolve_scope, views

    scope, now = resolve_scope(config.declaration, target), config.now()
    listing = list_dead_letters(config.sqs, config.directory, scope, records=config.records, now=now, limit=limit)
    output.show(listing.to_json(now), lambda: views.dead_letters_table(listing, now))


@dlq.command(cls=OpsCommand, name="show")
@click.argument("target")
@click.argument("id_", metavar="ID")
@ops_command
def dlq_show(config: CliConfig, output: Output, target: str, id_: str) -> None:
    """One dead letter (by job or message ID): its full body, every failure record and its final attempt."""
    from jobkit.ops import find_dead_letters, resolve_scope, views

    scope, now = resolve_scope(config.declaration, target), config.now()
    listing = find_dead_letters(config.sqs, config.directory, scope, id_, records=config.records, now=now)
    if not listing.items:
        raise click.ClickException(f"no dead letter with job or message ID {id_} in {scope.describe()}")
    output.show(
        {"messages": [d.to_json(now, full=True) for d in listing.items]},
        lambda: views.dead_letter_details(listing.items, now),
    )


@dlq.command(cls=OpsCommand, name="redrive")
@click.argument("target")
@click.option("--id", "ids", multiple=True, help="Only this job or message ID (repeatable).")
@click.option("--error-contains", default=None, help="Only messages whose verified last error has this (any case).")
@click.option("--dry-run", is_flag=True, help="Show what would be sent back; change nothing.")
@click.option("--uncancel", is_flag=True, help="Lift the cancellation of each job sent back, so it runs.")
@ops_command
def dlq_redrive(
    config: CliConfig,
    output: Output,
    target: str,
    ids: tuple[str, ...],
    error_contains: str | None,
    dry_run: bool,
    uncancel: bool,
) -> None:
    """Send dead letters back to their queue (after a fix), with a fresh set of
    attempts. A cancelled job stays cancelled unless --uncancel."""
    from jobkit.ops import redrive, resolve_scope, views

    scope = resolve_scope(config.declaration, target)
    lift = None
    if uncancel:
        from jobkit.ops.cancel import lifter, operator

        config.now()  # the local stack's clock, if the endpoint is one
        lift = lifter(config.declaration, config.records, config.clock, operator())
    progress = views.redrive_progress(console(stderr=True), disable=output.as_json or dry_run)
    with progress:
        task = progress.add_task("redrive", total=None)
        report = redrive(
            config.sqs,
            config.directory,
            scope,
            records=config.records,
            ids=ids,
            error_contains=error_contains,
            dry_run=dry_run,
            on_progress=lambda moved: progress.update(task, completed=moved),
            now=config.now(),
            uncancel=lift,
        )
    output.show(report.to_json(), lambda: views.redrive_text(report))


@dlq.command(cls=OpsCommand, name="purge")
@click.argument("target")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@ops_command
def dlq_purge(config: CliConfig, output: Output, target: str, yes: bool) -> None:
    """Delete every dead letter of TARGET for good (a type on a shared queue: only its own)."""
    from jobkit.ops import purge, resolve_scope, views

    scope = resolve_scope(config.declaration, target)
    spared = "" if scope.whole_queue else " The other types' dead letters stay."
    _confirm(f"Permanently delete {scope.describe()}?{spared}", yes)
    report = purge(config.sqs, config.directory, scope)
    output.show(report.to_json(), lambda: views.removal_text(report))


@dlq.command(cls=OpsCommand, name="delete")
@click.argument("target")
@click.argument("id_", metavar="ID")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@ops_command
def dlq_delete(config: CliConfig, output: Output, target: str, id_: str, yes: bool) -> None:
    """Delete one dead letter (by job or message ID) for good."""
    from jobkit.ops import delete, resolve_scope, views

    scope = resolve_scope(config.declaration, target)
    _confirm(f"Permanently delete dead letter {id_} from {scope.dlq_name}?", yes)
    report = delete(config.sqs, config.directory, scope, ids=[id_])
    if not report.removed:
        raise click.ClickException(f"no dead letter with job or message ID {id_} in {scope.describe()}")
    output.show(report.to_json(), lambda: views.removal_text(report))


def _confirm(question: str, yes: bool) -> None:
    if not yes:
        click.confirm(question, abort=True, err=True)
