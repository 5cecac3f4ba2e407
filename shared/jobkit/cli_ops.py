"""The ops commands of the ``jobkit`` CLI: ``queues``, ``top``, ``dlq``, ``push``, ``job``.

A thin shell, like rq's: each command resolves its arguments, calls one
:mod:`jobkit.ops` function with clients from :class:`CliConfig`, and prints the
result as JSON (``--json``) or as a rich table.

Every command finds the stack by its name prefix (``--prefix``,
``$JOBKIT_PREFIX``, else the declaration's) and the declaration with
``--config`` (else ``$JOBKIT_CONFIG``, else ``infra/jobs.toml``). AWS
credentials and region come from the usual chain; ``--endpoint-url`` (or
``$AWS_ENDPOINT_URL``, which boto3 reads itself) points at the local stack.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobkit.clock import Clock, SystemClock
from jobkit.config import Declaration, declaration_from_environment, load_declaration
from jobkit.errors import JobKitError

if TYPE_CHECKING:
    from rich.console import RenderableType

    from jobkit.push import JobQueueGroup
    from jobkit.records import RecordsBackend
    from jobkit.sqs import QueueDirectory
    from jobkit.wiring import AwsClients, Wiring


@dataclass
class CliConfig:
    """Where the commands look, and the objects they use, built on first use
    by the same composition root as apps and runners (:mod:`jobkit.wiring`).

    Tests (and embedders) may pass one as click's ``obj`` to set the clock;
    command-line options override its other fields.
    """

    config_path: Path | None = None
    prefix: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    clock: Clock = field(default_factory=SystemClock)
    _clients: AwsClients | None = field(default=None, repr=False)
    _wiring: Wiring | None = field(default=None, repr=False)

    @property
    def declaration(self) -> Declaration:
        return self.wiring.declaration

    @property
    def clients(self) -> AwsClients:
        if self._clients is None:
            from jobkit.wiring import AwsClients

            self._clients = AwsClients(region=self.region, endpoint_url=self.endpoint_url)
        return self._clients

    @property
    def wiring(self) -> Wiring:
        if self._wiring is None:
            from jobkit.wiring import Wiring

            declaration = load_declaration(self.config_path) if self.config_path else declaration_from_environment()
            declaration = declaration.with_prefix(self.prefix) if self.prefix else declaration
            self._wiring = Wiring(declaration, clients=self.clients, clock=self.clock)
        return self._wiring

    def client(self, service: str) -> Any:
        """A boto3 client for ``service``, one per config."""
        return self.clients.client(service)

    @property
    def directory(self) -> QueueDirectory:
        return self.wiring.directory

    @property
    def records(self) -> RecordsBackend:
        """The jobs table: failure and status records."""
        return self.wiring.records

    def queue_group(self) -> JobQueueGroup:
        return self.wiring.group()

    def now(self) -> float:
        return self.clock.now()


@dataclass(frozen=True)
class Output:
    """Prints a result as JSON or as a readable view."""

    as_json: bool

    def show(self, data: Any, view: Callable[[], RenderableType]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            _console().print(view())


def _console(*, stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr)


@contextmanager
def _clear_errors() -> Iterator[None]:
    """Turn jobkit's and AWS's errors into one-line messages and exit status 1."""
    from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

    try:
        yield
    except JobKitError as exc:
        raise click.ClickException(str(exc)) from exc
    except NoRegionError as exc:
        raise click.ClickException("no AWS region: pass --region or set AWS_REGION") from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "ClientError")
        hint = ""
        if "NonExistentQueue" in code or code == "QueueDoesNotExist":
            hint = " (is the prefix right? --prefix or $JOBKIT_PREFIX)"
        raise click.ClickException(f"AWS {exc.operation_name}: {code}: {error.get('Message', exc)}{hint}") from exc
    except BotoCoreError as exc:
        raise click.ClickException(f"AWS: {exc}") from exc


_COMMON_OPTIONS = (
    click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table."),
    click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The job declaration (default: $JOBKIT_CONFIG, else infra/jobs.toml).",
    ),
    click.option("--prefix", envvar="JOBKIT_PREFIX", default=None, help="The stack's name prefix [$JOBKIT_PREFIX]."),
    click.option("--endpoint-url", default=None, help="An AWS endpoint, e.g. the local stack's [$AWS_ENDPOINT_URL]."),
    click.option("--region", default=None, help="The AWS region (default: the usual chain)."),
)


def _ops_command(func: Callable[..., None]) -> Callable[..., None]:
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
        config = CliConfig(
            config_path=config_path or base.config_path,
            prefix=prefix or base.prefix,
            endpoint_url=endpoint_url or base.endpoint_url,
            region=region or base.region,
            clock=base.clock,
        )
        with _clear_errors():
            func(config, Output(as_json), **arguments)

    # click names a command and takes its help from the function it wraps.
    command.__name__, command.__doc__ = func.__name__, func.__doc__
    decorated: Callable[..., None] = click.pass_context(command)
    for option in reversed(_COMMON_OPTIONS):
        decorated = option(decorated)
    return decorated


def _confirm(question: str, yes: bool) -> None:
    if not yes:
        click.confirm(question, abort=True, err=True)


# -- commands -----------------------------------------------------------------------------------


@click.command()
@_ops_command
def queues(config: CliConfig, output: Output) -> None:
    """Per queue: queued, in flight, delayed and dead messages, and the oldest one's age."""
    from jobkit.ops import queue_summaries, views

    report = queue_summaries(
        config.client("sqs"), config.client("cloudwatch"), config.declaration, config.directory, now=config.now()
    )
    output.show(report.to_json(), lambda: views.queues_table(report))


@click.command()
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@click.option("--interval", default=10.0, show_default=True, type=click.FloatRange(min=1), help="Seconds per frame.")
@click.option("--window", default=5, show_default=True, type=click.IntRange(1, 180), help="Minutes of metrics.")
@_ops_command
def top(config: CliConfig, output: Output, once: bool, interval: float, window: int) -> None:
    """A live view per type: rates in and out, pickup delay, backlog, DLQ; the worst line stands out."""
    from jobkit.ops import top_snapshot, views

    def frame() -> Any:
        return top_snapshot(
            config.client("sqs"),
            config.client("cloudwatch"),
            config.declaration,
            config.directory,
            now=config.now(),
            window_s=window * 60,
        )

    if once or output.as_json:
        while True:  # JSON: one document per frame, a line each, for `| jq`
            snapshot = frame()
            if output.as_json:
                click.echo(json.dumps(snapshot.to_json(), ensure_ascii=False))
            else:
                _console().print(views.top_table(snapshot))
            if once:
                return
            time.sleep(interval)
    from rich.live import Live

    with Live(views.top_table(frame()), console=_console(), auto_refresh=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(views.top_table(frame()), refresh=True)
        except KeyboardInterrupt:
            return


@click.group()
def dlq() -> None:
    """Dead letters: list, show, redrive, purge, delete.

    TARGET is a job type or a queue. A type with a queue of its own means its
    whole DLQ; a type on a shared queue means only the messages whose body is
    that type's; a queue name means the queue's whole DLQ, with the messages
    that are not jobs. A message ID selects its message in any TARGET of its DLQ.
    Reasons are verified (the jobs table, or the tool's own check of the body);
    a message's jobkit.* attributes are shown as unverified claims.
    """


@dlq.command("list")
@click.argument("target")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(min=1), help="Show at most this many.")
@_ops_command
def dlq_list(config: CliConfig, output: Output, target: str, limit: int) -> None:
    """Dead letters with job ID, type, domain, age, attempts, the verified reason and error. Consumes nothing."""
    from jobkit.ops import list_dead_letters, resolve_scope, views

    scope, now, sqs = resolve_scope(config.declaration, target), config.now(), config.client("sqs")
    listing = list_dead_letters(sqs, config.directory, scope, records=config.records, now=now, limit=limit)
    output.show(listing.to_json(now), lambda: views.dead_letters_table(listing, now))


@dlq.command("show")
@click.argument("target")
@click.argument("id_", metavar="ID")
@_ops_command
def dlq_show(config: CliConfig, output: Output, target: str, id_: str) -> None:
    """One dead letter (by job or message ID): its full body, every failure record and its final attempt."""
    from jobkit.ops import find_dead_letters, resolve_scope, views

    scope, now = resolve_scope(config.declaration, target), config.now()
    listing = find_dead_letters(config.client("sqs"), config.directory, scope, id_, records=config.records, now=now)
    if not listing.items:
        raise click.ClickException(f"no dead letter with job or message ID {id_} in {scope.describe()}")
    output.show(
        {"messages": [d.to_json(now, full=True) for d in listing.items]},
        lambda: views.dead_letter_details(listing.items, now),
    )


@dlq.command("redrive")
@click.argument("target")
@click.option("--id", "ids", multiple=True, help="Only this job or message ID (repeatable).")
@click.option("--error-contains", default=None, help="Only messages whose verified last error has this (any case).")
@click.option("--dry-run", is_flag=True, help="Show what would be sent back; change nothing.")
@_ops_command
def dlq_redrive(
    config: CliConfig, output: Output, target: str, ids: tuple[str, ...], error_contains: str | None, dry_run: bool
) -> None:
    """Send dead letters back to their queue (after a fix), with a fresh set of attempts."""
    from jobkit.ops import redrive, resolve_scope, views

    scope = resolve_scope(config.declaration, target)
    progress = views.redrive_progress(_console(stderr=True), disable=output.as_json or dry_run)
    with progress:
        task = progress.add_task("redrive", total=None)
        report = redrive(
            config.client("sqs"),
            config.directory,
            scope,
            records=config.records,
            ids=ids,
            error_contains=error_contains,
            dry_run=dry_run,
            on_progress=lambda moved: progress.update(task, completed=moved),
            now=config.now(),
        )
    output.show(report.to_json(), lambda: views.redrive_text(report))


@dlq.command("purge")
@click.argument("target")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_ops_command
def dlq_purge(config: CliConfig, output: Output, target: str, yes: bool) -> None:
    """Delete every dead letter of TARGET for good (a type on a shared queue: only its own)."""
    from jobkit.ops import purge, resolve_scope, views

    scope = resolve_scope(config.declaration, target)
    spared = "" if scope.whole_queue else " The other types' dead letters stay."
    _confirm(f"Permanently delete {scope.describe()}?{spared}", yes)
    report = purge(config.client("sqs"), config.directory, scope)
    output.show(report.to_json(), lambda: views.removal_text(report))


@dlq.command("delete")
@click.argument("target")
@click.argument("id_", metavar="ID")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_ops_command
def dlq_delete(config: CliConfig, output: Output, target: str, id_: str, yes: bool) -> None:
    """Delete one dead letter (by job or message ID) for good."""
    from jobkit.ops import delete, resolve_scope, views

    scope = resolve_scope(config.declaration, target)
    _confirm(f"Permanently delete dead letter {id_} from {scope.dlq_name}?", yes)
    report = delete(config.client("sqs"), config.directory, scope, ids=[id_])
    if not report.removed:
        raise click.ClickException(f"no dead letter with job or message ID {id_} in {scope.describe()}")
    output.show(report.to_json(), lambda: views.removal_text(report))


@click.command()
@click.argument("job_type", metavar="TYPE")
@click.option("--params", default="{}", show_default=True, help="The job's params, a JSON object.")
@click.option("--domain", default=None, help="The domain (tenant) the job belongs to.")
@click.option("--delay", type=click.FloatRange(min=0), default=None, help="Run no earlier than this many seconds.")
@_ops_command
def push(
    config: CliConfig, output: Output, job_type: str, params: str, domain: str | None, delay: float | None
) -> None:
    """Enqueue one job by hand, through the push SDK."""
    from rich.text import Text

    from jobkit.ops import push_job

    job_id = push_job(config.queue_group(), job_type, params, domain=domain, delay_s=delay)
    output.show({"job_id": job_id, "type": job_type, "domain": domain}, lambda: Text(f"pushed {job_type} {job_id}"))


@click.command()
@click.argument("job_id", metavar="ID")
@click.option("--type", "job_type", default=None, help="Only this job type (default: every declared type).")
@click.option("--domain", default=None, help="Only this domain (default: every domain).")
@click.option("--no-domain", is_flag=True, help="Only the job without a domain.")
@_ops_command
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


OPS_COMMANDS: tuple[click.Command, ...] = (queues, top, dlq, push, job)


def register_ops_commands(group: click.Group) -> None:
    """Add the ops commands to the ``jobkit`` group."""
    for command in OPS_COMMANDS:
        group.add_command(command)
