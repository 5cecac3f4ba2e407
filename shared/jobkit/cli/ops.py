"""The ops commands of the ``jobkit`` CLI: ``queues``, ``top``, ``dlq``, ``push``, ``job``, ``ui``, ``verify``.

A thin shell, like rq's: each command resolves its arguments, calls one
:mod:`jobkit.ops` function with the clients and stores of a
:class:`~jobkit.ops.config.CliConfig`, and prints the result as JSON
(``--json``) or as a rich view (:mod:`jobkit.cli.output`).

Every command finds the stack by its name prefix (``--prefix``,
``$JOBKIT_PREFIX``, else the declaration's) and the declaration with
``--config`` (else ``$JOBKIT_CONFIG``, else ``infra/jobs.toml``). AWS
credentials and region come from the usual chain; ``--endpoint-url`` (or
``$AWS_ENDPOINT_URL``, which boto3 reads itself) points at the local stack,
and is then all it takes: ``jobkit local up`` says what it is, and the
commands use its region and dummy credentials (:mod:`jobkit.ops.local_endpoint`).
Either must be a URL with a scheme and a host (``http://127.0.0.1:4566``), or
the command stops with a one-line error before any request.

``ui`` serves the same views as web pages (:mod:`jobkit.ui`); its web stack is
imported when it runs, never with the other commands.

With ``--json``, results are indented JSON on stdout, and errors are one JSON
object on stderr, ``{"error": "<message>", "exit_status": 1}`` (``2`` for a
bad option or value): see :mod:`jobkit.cli.errors`. Without it, an error is
one plain line.
"""

from __future__ import annotations

import click

from jobkit.cli.batch import batch
from jobkit.cli.cancel import cancel
from jobkit.cli.dlq import dlq
from jobkit.cli.jobs import job, push
from jobkit.cli.queues import queues, top
from jobkit.cli.schedules import schedules
from jobkit.cli.ui import ui
from jobkit.cli.verify import verify

OPS_COMMANDS: tuple[click.Command, ...] = (queues, top, dlq, push, job, cancel, batch, schedules, ui, verify)


def register_ops_commands(group: click.Group) -> None:
    """Add the ops commands to the ``jobkit`` group."""
    for command in OPS_COMMANDS:
        group.add_command(command)
