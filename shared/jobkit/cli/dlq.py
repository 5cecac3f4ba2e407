"""``jobkit dlq``: dead letters, listed, shown, redriven, purged and deleted."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from jobkit.cli.options import OpsCommand, OpsGroup, ops_command
from jobkit.cli.output import Output, console
from jobkit.ops.config import CliConfig

if TYPE_CHECKING:
    from rich.console import RenderableType

    from jobkit.ops import DeadLetter, Scope
    from jobkit.ops.dead_params import FetchedParams

R = TypeVar("R")

#: Every command's TARGET is in each lane of its queue in turn, unless --priority names one.
priority_option = click.option(
    "--priority",
    default=None,
    metavar="LANE",
    help="Only this priority lane's DLQ (default: the queue's own). Without it: each lane in turn, its own first.",
)


def _each_lane(
    output: Output,
    scopes: Sequence[Scope],
    reports: Sequence[R],
    to_json: Callable[[R], dict[str, Any]],
    view: Callable[[R], RenderableType],
) -> None:
    """Show a command's report for each lane: as before for a queue without
    lanes; else its lanes' reports together, in the same shape (counts added,
    lists joined, the queue's own lane's names), with each lane's under
    ``lanes``, and each lane's view under its DLQ's name."""
    if len(scopes) == 1:
        output.show(to_json(reports[0]), lambda: view(reports[0]))
        return
    from rich.console import Group
    from rich.text import Text

    def views() -> RenderableType:
        parts: list[RenderableType] = []
        for scope, report in zip(scopes, reports, strict=True):
            parts += [Text(f"{scope.dlq_name} (lane {scope.priority or 'default'})", style="bold"), view(report)]
        return Group(*parts)

    lanes = [{"priority": scope.priority, **to_json(report)} for scope, report in zip(scopes, reports, strict=True)]
    output.show({**_together(lanes), "lanes": lanes}, views)


def _together(lanes: list[dict[str, Any]]) -> dict[str, Any]:
    """The lanes' reports as one, in a single report's shape: numbers added, lists
    joined (a message tagged with its lane), flags or'd, the first (the queue's own) lane's names."""
    together = dict(lanes[0])
    for name, first in lanes[0].items():
        values = [lane.get(name) for lane in lanes]
        if isinstance(first, bool):
            together[name] = any(values)
        elif isinstance(first, int | float):
            together[name] = sum(v for v in values if isinstance(v, int | float))
        elif isinstance(first, list):
            together[name] = [
                {**item, "priority": lane["priority"]} if isinstance(item, dict) else item
                for lane in lanes
                for item in lane.get(name) or []
            ]
    together.pop("priority", None)
    return together


@click.group(cls=OpsGroup)
def dlq() -> None:
    """Dead letters: list, show, redrive, purge, delete.

    TARGET is a job type or a queue. A type with a queue of its own means its
    whole DLQ; a type on a shared queue means only the messages whose body is
    that type's; a queue name means the queue's whole DLQ, with the messages
    that are not jobs. A queue with priority lanes has a DLQ per lane: each in
    turn, or one with --priority. A message ID selects its message in any TARGET of its DLQ.
    Reasons are verified (the jobs table, or the tool's own check of the body);
    a message's jobkit.* attributes are shown as unverified claims.
    """


@dlq.command(cls=OpsCommand, name="list")
@click.argument("target")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="Show at most this many.")
@priority_option
@ops_command
def dlq_list(config: CliConfig, output: Output, target: str, limit: int, priority: str | None) -> None:
    """Dead letters with job ID, type, domain, age, attempts, the verified reason and error. Consumes nothing."""
    from jobkit.ops import list_dead_letters, resolve_scopes, views

    scopes, now = resolve_scopes(config.declaration, target, priority), config.now()
    listings = [
        list_dead_letters(config.sqs, config.directory, scope, records=config.records, now=now, limit=limit)
        for scope in scopes
    ]
    table = functools.partial(views.dead_letters_table, now=now)
    _each_lane(output, scopes, listings, lambda found: found.to_json(now), table)


@dlq.command(cls=OpsCommand, name="show")
@click.argument("target")
@click.argument("id_", metavar="ID")
@click.option("--params", "fetch", is_flag=True, help="Fetch params kept in the payload bucket (a large job's).")
@priority_option
@ops_command
def dlq_show(config: CliConfig, output: Output, target: str, id_: str, fetch: bool, priority: str | None) -> None:
    """One dead letter (by job or message ID): its full body, every failure record and its final attempt."""
    from jobkit.ops import find_dead_letters, resolve_scopes, views
    from jobkit.ops.dead_params import fetch_params

    scopes, now = resolve_scopes(config.declaration, target, priority), config.now()
    items = [
        dead
        for scope in scopes
        for dead in find_dead_letters(config.sqs, config.directory, scope, id_, records=config.records, now=now).items
    ]
    if not items:
        raise click.ClickException(
            f"no dead letter with job or message ID {id_} in {'; '.join(s.describe() for s in scopes)}"
        )
    fetched = [fetch_params(d, config.payloads) if fetch else None for d in items]
    shown = [{**d.to_json(now, full=True), **_params(d, f)} for d, f in zip(items, fetched, strict=True)]
    output.show({"messages": shown}, lambda: views.dead_letter_details(items, now, fetched))


def _params(dead: DeadLetter, fetched: FetchedParams | None) -> dict[str, Any]:
    """A large dead letter's reference in the JSON output, with its params (or why not) once fetched."""
    if dead.params_ref is None:
        return {}
    return {"params_ref": fetched.to_json() if fetched is not None else dead.params_ref.to_wire()}


@dlq.command(cls=OpsCommand, name="redrive")
@click.argument("target")
@click.option("--id", "ids", multiple=True, help="Only this job or message ID (repeatable).")
@click.option("--error-contains", default=None, help="Only messages whose verified last error has this (any case).")
@click.option("--dry-run", is_flag=True, help="Show what would be sent back; change nothing.")
@click.option("--uncancel", is_flag=True, help="Lift the cancellation of each job sent back, so it runs.")
@priority_option
@ops_command
def dlq_redrive(
    config: CliConfig,
    output: Output,
    target: str,
    ids: tuple[str, ...],
    error_contains: str | None,
    dry_run: bool,
    uncancel: bool,
    priority: str | None,
) -> None:
    """Send dead letters back to their queue (after a fix), with a fresh set of
    attempts: a priority lane's to that lane. A cancelled job stays cancelled unless --uncancel."""
    from jobkit.ops import redrive, resolve_scopes, views

    scopes = resolve_scopes(config.declaration, target, priority)
    lift = None
    if uncancel:
        from jobkit.ops.cancel import lifter, operator

        config.now()  # the local stack's clock, if the endpoint is one
        lift = lifter(config.declaration, config.records, config.clock, operator())
    progress = views.redrive_progress(console(stderr=True), disable=output.as_json or dry_run)
    reports = []
    with progress:
        for scope in scopes:
            task = progress.add_task(f"redrive {scope.dlq_name}", total=None)
            moved: Callable[[int], None] = functools.partial(_progressed, progress, task)
            reports.append(
                redrive(
                    config.sqs,
                    config.directory,
                    scope,
                    records=config.records,
                    ids=ids,
                    error_contains=error_contains,
                    dry_run=dry_run,
                    on_progress=moved,
                    now=config.now(),
                    uncancel=lift,
                )
            )
    _each_lane(output, scopes, reports, lambda report: report.to_json(), views.redrive_text)


@dlq.command(cls=OpsCommand, name="purge")
@click.argument("target")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@priority_option
@ops_command
def dlq_purge(config: CliConfig, output: Output, target: str, yes: bool, priority: str | None) -> None:
    """Delete every dead letter of TARGET for good (a type on a shared queue: only its own)."""
    from jobkit.ops import purge, resolve_scopes, views

    scopes = resolve_scopes(config.declaration, target, priority)
    spared = "" if scopes[0].whole_queue else " The other types' dead letters stay."
    _confirm(f"Permanently delete {'; '.join(s.describe() for s in scopes)}?{spared}", yes)
    reports = [purge(config.sqs, config.directory, scope) for scope in scopes]
    _each_lane(output, scopes, reports, lambda report: report.to_json(), views.removal_text)


@dlq.command(cls=OpsCommand, name="delete")
@click.argument("target")
@click.argument("id_", metavar="ID")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@priority_option
@ops_command
def dlq_delete(config: CliConfig, output: Output, target: str, id_: str, yes: bool, priority: str | None) -> None:
    """Delete one dead letter (by job or message ID) for good."""
    from jobkit.ops import delete, resolve_scopes, views

    scopes = resolve_scopes(config.declaration, target, priority)
    _confirm(f"Permanently delete dead letter {id_} from {', '.join(s.dlq_name for s in scopes)}?", yes)
    for scope in scopes:
        report = delete(config.sqs, config.directory, scope, ids=[id_])
        if report.removed:
            output.show(report.to_json(), functools.partial(views.removal_text, report))
            return
    raise click.ClickException(
        f"no dead letter with job or message ID {id_} in {'; '.join(s.describe() for s in scopes)}"
    )


def _progressed(progress: Any, task: Any, moved: int) -> None:
    progress.update(task, completed=moved)


def _confirm(question: str, yes: bool) -> None:
    if not yes:
        click.confirm(question, abort=True, err=True)
