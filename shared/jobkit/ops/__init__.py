"""Ops tooling: the library behind ``jobkit queues``, ``top``, ``dlq``, ``push`` and ``job``.

Every function takes its AWS clients as arguments and creates none; the CLI
(:mod:`jobkit.cli`) builds them and renders the results, either as JSON
(each result's ``to_json()``) or as rich tables (:mod:`jobkit.ops.views`).

- :mod:`~jobkit.ops.queues`: counts per queue (``showJobs.php --group``)
- :mod:`~jobkit.ops.top`: rates, pickup delays and lag per type
- :mod:`~jobkit.ops.dead_letters`: DLQ messages, read without consuming them, whatever their body
- :mod:`~jobkit.ops.verdict`: why a message died, from the jobs table or the tool's own check,
  never from the message's own attributes
- :mod:`~jobkit.ops.redrive`: back to the queue, natively or copy-then-delete
- :mod:`~jobkit.ops.dlq`: delete and purge
- :mod:`~jobkit.ops.jobs`: push one job; a job's status, failure and final-attempt records
"""

from __future__ import annotations

from jobkit.ops.dead_letters import DeadLetter, DeadLetterListing, find_dead_letters, list_dead_letters
from jobkit.ops.dlq import RemovalReport, delete, purge
from jobkit.ops.jobs import JobMatch, JobReport, job_report, push_job
from jobkit.ops.queues import QueuesReport, QueueSummary, queue_summaries
from jobkit.ops.redrive import RedriveReport, redrive
from jobkit.ops.scope import Scope, resolve_scope, resolve_scopes
from jobkit.ops.top import TopSnapshot, TypeLine, top_snapshot
from jobkit.ops.verdict import Claimed, Reason, Verdict
from jobkit.records import ANY_DOMAIN

__all__ = [
    "ANY_DOMAIN",
    "Claimed",
    "DeadLetter",
    "DeadLetterListing",
    "JobMatch",
    "JobReport",
    "QueueSummary",
    "QueuesReport",
    "Reason",
    "RedriveReport",
    "RemovalReport",
    "Scope",
    "TopSnapshot",
    "TypeLine",
    "Verdict",
    "delete",
    "find_dead_letters",
    "job_report",
    "list_dead_letters",
    "purge",
    "push_job",
    "queue_summaries",
    "redrive",
    "resolve_scope",
    "resolve_scopes",
    "top_snapshot",
]
