"""Removing dead letters for good: delete some, or purge a DLQ.

Purging a TYPE follows :mod:`jobkit.ops.scope`: a type with its own queue
purges its DLQ (``PurgeQueue``); a type on a shared queue deletes only its own
messages (by the type their body names), one by one, and leaves the other
types' dead letters alone, which is what an operator naming one type expects.
Naming the queue purges all of it. A message whose body names no type of the
queue (one that is not a job at all, say) is deleted by naming the queue, or
by its message ID in any scope of its DLQ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.ops.dead_letters import DeadLetter, dead_letter
from jobkit.ops.scan import QueueScan
from jobkit.ops.scope import Scope
from jobkit.sqs import QueueDirectory, delete_in_chunks

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class RemovalReport:
    """What a delete or a purge removed.

    Attributes:
        mode: ``purge_queue`` (SQS's PurgeQueue: ``removed`` is SQS's estimate
            of what the DLQ held) or ``delete`` (messages deleted one by one).
        removed: how many messages went.
        job_ids: the deleted jobs (``delete`` only; ``None`` for a message that is not a job).
        message_ids: the deleted messages (``delete`` only).
    """

    mode: str
    scope: Scope
    removed: int
    job_ids: tuple[str | None, ...] = ()
    message_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "dlq": self.scope.dlq_name,
            "removed": self.removed,
            "job_ids": list(self.job_ids),
            "message_ids": list(self.message_ids),
        }


def purge(sqs: SQSClient, directory: QueueDirectory, scope: Scope) -> RemovalReport:
    """Empty a scope's dead letters: the whole DLQ, or one type's messages on a shared one.

    ``PurgeQueue`` may take up to 60 seconds to finish on AWS, and a DLQ can
    be purged once per 60 seconds.
    """
    if not scope.whole_queue:
        return delete(sqs, directory, scope)
    _, dlq_url = scope.urls(directory)
    attributes = sqs.get_queue_attributes(
        QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    sqs.purge_queue(QueueUrl=dlq_url)
    return RemovalReport("purge_queue", scope, sum(int(v) for v in attributes.values()))


def delete(
    sqs: SQSClient,
    directory: QueueDirectory,
    scope: Scope,
    ids: Sequence[str] = (),
    *,
    message_ids_only: bool = False,
) -> RemovalReport:
    """Delete a scope's dead letters: those with the given job or message IDs (with
    ``message_ids_only``, message IDs alone), or all (see :meth:`DeadLetter.selected`).
    Reads any body; never asks why a message died."""
    _, dlq_url = scope.urls(directory)
    removed: list[DeadLetter] = []
    with QueueScan(sqs, dlq_url) as scan:
        for batch in scan.batches():
            doomed = [d for d in map(dead_letter, batch) if d.selected(scope, ids, message_ids_only=message_ids_only)]
            for chunk in delete_in_chunks(sqs, dlq_url, doomed, lambda d: d.receipt_handle):
                scan.forget(d.message_id for d in chunk.done)
                removed.extend(chunk.done)
    return RemovalReport(
        "delete", scope, len(removed), tuple(d.job_id for d in removed), tuple(d.message_id for d in removed)
    )
