"""``jobkit ui``: a web "top" for operators, on their own machine.

A view over the ops library (:mod:`jobkit.ops`), never a second copy of its
logic: the overview is :func:`~jobkit.ops.queue_summaries` and
:func:`~jobkit.ops.top_snapshot`, a type's page is
:func:`~jobkit.ops.list_dead_letters`, a job's page is
:func:`~jobkit.ops.job_report`, and the actions are
:func:`~jobkit.ops.redrive`, :func:`~jobkit.ops.delete` and
:func:`~jobkit.ops.purge`, called as ``jobkit dlq`` calls them, and
:func:`~jobkit.ops.cancel.cancel_one` and :func:`~jobkit.ops.cancel.cancel_all`,
as ``jobkit cancel`` calls them.

- :mod:`~jobkit.ui.app`: the Starlette application, from a
  :class:`~jobkit.ops.config.CliConfig` and :class:`~jobkit.ui.settings.UiSettings`
- :mod:`~jobkit.ui.pages`: the pages (overview, type, job)
- :mod:`~jobkit.ui.actions`: redrive, delete, purge and cancel, behind a confirmation
- :mod:`~jobkit.ui.cancelling`: cancel a job, or every job pushed until now; lift on a redrive
- :mod:`~jobkit.ui.overview`: one row per type, from the ops reports
- :mod:`~jobkit.ui.history`: the last hour per type, for the sparklines
- :mod:`~jobkit.ui.sparkline`: a series as a small inline SVG
- :mod:`~jobkit.ui.access`: who may open the pages (loopback, or a token)
- :mod:`~jobkit.ui.csrf`: why a POST from another site never acts
- :mod:`~jobkit.ui.headers`: the security headers of every response
- :mod:`~jobkit.ui.server`: serving it with uvicorn

Its web stack (Starlette, Jinja2, uvicorn) comes with the ``[cli]`` extra and
is imported only here, so no other command, and never the Lambda runner,
imports it. Every asset is served from this package: the pages load nothing
from anywhere else.
"""
