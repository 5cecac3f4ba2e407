"""The ``jobkit`` command line: a thin shell over jobkit's library functions.

One concept per module, as in rq's CLI:

- :mod:`~jobkit.cli.commands`: the ``jobkit`` group and the development
  commands (``demo``, ``template``, ``local up``)
- :mod:`~jobkit.cli.ops`: the ops commands the group adds:
  :mod:`~jobkit.cli.queues` (``queues``, ``top``), :mod:`~jobkit.cli.dlq`
  (``dlq list|show|redrive|purge|delete``) and :mod:`~jobkit.cli.jobs`
  (``push``, ``job``)
- :mod:`~jobkit.cli.options`: the options the commands share, and how an
  ops command reads them
- :mod:`~jobkit.ops.config`: :class:`~jobkit.ops.config.CliConfig`, where an
  ops command gets its declaration, clients and stores
- :mod:`~jobkit.cli.errors`: jobkit's and AWS's errors as one-line messages
- :mod:`~jobkit.cli.output`: a result as JSON or as a rich view

Importing it loads click, not rich or boto3: a command imports what it needs when it runs.
"""

from __future__ import annotations

from jobkit.core.extras import require

require("cli", "the jobkit command")

from jobkit.cli.commands import main  # noqa: E402

__all__ = ["main"]
