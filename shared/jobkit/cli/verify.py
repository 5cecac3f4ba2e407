"""``jobkit verify``: a deployed stack proves itself in one command (:mod:`jobkit.ops.verify`).

One line per check as it is judged, then a summary; exit status 0 when every
check passed, 1 when one failed, 2 when verify could not run at all (no such
stack, a permission refused, no endpoint): one line saying what is missing.
"""

from __future__ import annotations

import json
import math
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import click

from jobkit.cli.errors import OptionError
from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig

if TYPE_CHECKING:
    from jobkit.ops.verify import Verify


class VerifyFailed(click.ClickException):
    """What verify could not do at all: one line, exit status 2."""

    exit_code = 2


def _timeout(_: click.Context, __: click.Parameter, value: float) -> float:
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds")
    return value


@click.command(cls=OpsCommand)
@click.option("--types", "types", multiple=True, metavar="TYPE", help="Only the queues of these types (repeatable).")
@click.option(
    "--timeout",
    "timeout_s",
    default=120.0,
    show_default=True,
    type=click.FloatRange(min=30, max=900),
    callback=_timeout,
    help="Seconds to wait for every canary's fate: 30 (the chain takes about 21) to 900 (a canary's life).",
)
@click.option(
    "--no-dead-letter",
    "no_dead_letter",
    is_flag=True,
    help=(
        "Skip the dead-letter check: it puts a canary in each DLQ for a few seconds, which the DLQ alarm's"
        " one-minute sample of its depth may catch."
    ),
)
@ops_command
def verify(config: CliConfig, output: Output, types: tuple[str, ...], timeout_s: float, no_dead_letter: bool) -> None:
    """Prove a deployed stack: canaries through each queue, and its wiring read back.

    Per queue: a canary runs and its twin is skipped as its duplicate; a delayed
    canary is picked up after its release; a chain of 20 hops completes (which
    Lambda's recursive loop detection stops without RecursiveLoop: Allow); a
    failing canary reaches the DLQ with its reason. And the queue's redrive
    policy, its runner's recursion setting and event source mapping, and its
    alarms, against the declaration. When every check passes it leaves nothing
    behind; otherwise it names each canary whose fate it did not see.
    """
    from jobkit.core.errors import JobKitError
    from jobkit.ops.verify import Check, Clients, VerifyRefused

    try:
        declaration = config.declaration
    except JobKitError as exc:
        raise VerifyFailed(str(exc)) from exc
    unknown = [t for t in types if t not in declaration.types]
    if unknown:
        raise OptionError(f"--types: {', '.join(unknown)} not declared (declared: {', '.join(declaration.types)})")
    names = {declaration.types[t].queue for t in types} if types else set(declaration.queues)
    queues = [declaration.queues[name] for name in sorted(names)]

    def shown(check: Check) -> None:
        if not output.as_json:
            mark = "pass" if check.ok else "FAIL"
            click.echo(f"{mark}  {check.queue or '-':<20} {check.name:<15} {check.detail}")

    run: Verify | None = None
    try:
        urls = _queue_urls(config, declaration, [lane.key for q in queues for lane in q.lanes])
        clients = Clients(
            sqs=config.sqs,
            lambda_=config.clients.client("lambda"),
            cloudwatch=config.cloudwatch,
            records=config.records,
        )
        from jobkit.ops.verify import Verify

        run = Verify(declaration, clients, urls, timeout_s=timeout_s, dead_letter=not no_dead_letter, on_check=shown)
        with _stopped_cleanly():
            checks = run.run(queues)
    except VerifyRefused as exc:
        raise VerifyFailed(_with_left(str(exc), run)) from exc
    except KeyboardInterrupt as exc:
        raise VerifyFailed(_with_left("interrupted: not every check was made", run)) from exc
    failed = [c for c in checks if not c.ok]
    summary = f"{len(checks) - len(failed)} of {len(checks)} checks passed on {len(queues)} queue(s)"
    if output.as_json:
        found = {"ok": not failed, "summary": summary, "checks": [c.as_dict() for c in checks]}
        click.echo(json.dumps({**found, "left_behind": run.left_behind}, indent=2))
    else:
        if failed:
            summary += f"; failed: {', '.join(sorted({c.name for c in failed}))} (what to do: docs/runbook.md,"
            summary += " 'After a deploy')"
        click.echo(summary)
        for line in run.left_behind:
            click.echo(f"left behind: {line}")
    if failed:
        raise SystemExit(1)


@contextmanager
def _stopped_cleanly() -> Iterator[None]:
    """SIGTERM and SIGHUP (a cancelled CI job, a closed terminal) stop verify as
    Ctrl-C does: it still deletes what its canaries left, and says what remains."""

    def interrupt(signum: int, _: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        with suppress(ValueError):  # not the main thread: leave the signals as they are
            previous[signum] = signal.signal(signum, interrupt)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _with_left(problem: str, run: Verify | None) -> str:
    """The one line of a verify that could not finish, with the canaries it left."""
    left = run.left_behind if run is not None else []
    if not left:
        return problem
    return f"{problem}; {len(left)} canary(ies) left behind: " + "; ".join(left)


def _queue_urls(config: CliConfig, declaration: object, queues: list[str]) -> dict[str, str]:
    """The URLs of the queues and DLQs to verify, looked up by name (one line if one is missing)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from jobkit.declaration.config import Declaration
    from jobkit.ops.verify import VerifyRefused

    assert isinstance(declaration, Declaration)
    urls: dict[str, str] = {}
    for queue in queues:
        for name in (declaration.queue_name(queue), declaration.dlq_name(queue)):
            try:
                urls[name] = config.sqs.get_queue_url(QueueName=name)["QueueUrl"]
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if "NonExistentQueue" in code or code == "QueueDoesNotExist":
                    raise VerifyRefused(
                        f"queue {name} does not exist: is the stack deployed under prefix {declaration.prefix!r},"
                        " in this region, from this declaration (a queue or priority lane added since is not)?"
                    ) from exc
                if "AccessDenied" in code:
                    raise VerifyRefused(
                        f"sqs:GetQueueUrl was refused on {name}: attach the stack's OperatorPolicy"
                    ) from exc
                raise VerifyRefused(f"could not look up queue {name}: {exc}") from exc
            except BotoCoreError as exc:  # no endpoint, no credentials, no region
                raise VerifyRefused(f"could not reach SQS: {exc}") from exc
    return urls
