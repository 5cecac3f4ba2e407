"""The ops commands of the ``jobkit`` CLI: ``queues``, ``top``, ``dlq``, ``push``, ``job``.

A thin shell, like rq's: each command resolves its arguments, calls one
:mod:`jobkit.ops` function with the clients and stores of a
:class:`~jobkit.cli.config.CliConfig`, and prints the result as JSON
(``--json``) or as a rich view (:mod:`jobkit.cli.output`).

Every command finds the stack by its name prefix (``--prefix``,
``$JOBKIT_PREFIX``, else the declaration's) and the declaration with
``--config`` (else ``$JOBKIT_CONFIG``, else ``infra/jobs.toml``). AWS
credentials and region come from the usual chain; ``--endpoint-url`` (or
``$AWS_ENDPOINT_URL``, which boto3 reads itself) points at the local stack.
"""

from __future__ import annotations

import click

from jobkit.cli.dlq import dlq
from jobkit.cli.jobs import job, push
from jobkit.cli.queues import queues, top

OPS_COMMANDS: tuple[click.Command, ...] = (queues, top, dlq, push, job)


def register_ops_commands(group: click.Group) -> None:
    """Add the ops commands to the ``jobkit`` group."""
    for command in OPS_COMMANDS:
        group.add_command(command)
