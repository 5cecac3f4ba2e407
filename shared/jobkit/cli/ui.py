"""``jobkit ui``: the ops views as web pages, served on the operator's machine.

An ops command like the others (``--config``, ``--prefix``,
``--endpoint-url``, ``--region``, one :class:`~jobkit.ops.config.CliConfig`),
whose output is a server: see :mod:`jobkit.ui`. Its web stack is imported
when it runs, never with the CLI.
"""

from __future__ import annotations

import importlib.util
import sys

import click

from jobkit.cli.options import OpsCommand, ops_command
from jobkit.cli.output import Output
from jobkit.ops.config import CliConfig

#: What the command imports to serve the pages (they come with the [cli] extra).
WEB_MODULES = ("starlette", "jinja2", "uvicorn")


@click.command(cls=OpsCommand)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on; not loopback needs --token.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@click.option(
    "--token",
    envvar="JOBKIT_UI_TOKEN",
    default=None,
    help="Require this token on every request (needed to serve on an address other than loopback) [$JOBKIT_UI_TOKEN].",
)
@click.option(
    "--allow-actions", is_flag=True, help="Show redrive, delete, purge and cancel buttons (off: the pages only read)."
)
@click.option(
    "--interval",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=2),
    help="Seconds between the overview's refreshes (each costs what a `jobkit top` frame costs).",
)
@click.option("--window", default=5, show_default=True, type=click.IntRange(1, 180), help="Minutes of metrics.")
@ops_command
def ui(
    config: CliConfig,
    output: Output,
    host: str,
    port: int,
    token: str | None,
    allow_actions: bool,
    interval: float,
    window: int,
) -> None:
    """Serve a web view of the queues: overview, dead letters, jobs; until Ctrl-C.

    It binds 127.0.0.1 unless --host says otherwise, and then only with a
    --token, which every request must carry. It reads AWS with your usual
    credentials and sends nothing anywhere else. With --allow-actions it can
    redrive, delete and purge dead letters, and cancel jobs, each after a confirmation."""
    missing = [name for name in WEB_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"jobkit ui needs {', '.join(missing)}, which come with the [cli] extra: pip install 'jobkit-aws[cli]'"
        )
    from jobkit.ui.access import bind_problem, is_loopback
    from jobkit.ui.app import create_app
    from jobkit.ui.server import bind, serve, url
    from jobkit.ui.settings import UiSettings

    token = token or None
    problem = bind_problem(host, token)
    if problem is not None:
        raise click.UsageError(problem)
    if token is not None and len(token) < 16:
        raise click.BadParameter("use at least 16 characters (e.g. from `openssl rand -hex 16`)", param_hint="--token")
    settings = UiSettings(
        allow_actions=allow_actions,
        token=token,
        loopback=is_loopback(host),
        interval_s=interval,
        window_s=window * 60,
    )
    app = create_app(config, settings)  # loads the declaration: a bad --config fails here, before binding
    sock = bind(host, port)
    address = url(sock, token)

    def ready() -> None:
        actions = "on" if allow_actions else "off (--allow-actions turns them on)"
        from rich.text import Text  # plain text: an IPv6 address has brackets

        output.show(
            {"url": address, "actions": allow_actions},
            lambda: Text(f"jobkit ui: open {address}\nactions: {actions}; Ctrl-C stops"),
        )
        sys.stdout.flush()  # promptly, even into a pipe

    try:
        serve(app, sock, on_ready=ready)
    finally:
        sock.close()
