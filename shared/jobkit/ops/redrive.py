"""Redrive: send dead letters back to their queue, after a fix.

Two ways:

- **Native.** A whole DLQ with no filter goes back with SQS's own
  ``StartMessageMoveTask``: SQS moves the messages itself, at its own pace,
  and the command returns at once with the task handle.
- **Copy.** Filtered redrives (``--id``, ``--error-contains``, one type of a
  shared queue), and whole ones where the native task is unavailable (moto,
  a policy without ``sqs:StartMessageMoveTask``): each message is sent to the
  queue, *then* deleted from the DLQ. An interruption never loses a message: a
  message not yet sent stays in the DLQ (it is visible again within
  :data:`REDRIVE_VISIBILITY_S`), and one sent but not deleted is at worst in
  both queues, which at-least-once delivery allows.

A redriven message is a new message: its receive count starts again, so it
gets the type's full ``max_attempts``; the body (``priorAttempts`` included)
is unchanged. The copy drops the ``jobkit.*`` dead-letter reason; a native
move keeps it, which is harmless: the runner reads only ``JobType``, and drops
``jobkit.*`` when it dead-letters again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobkit.ops.dead_letters import DeadLetter, dead_letter, list_dead_letters, with_failures
from jobkit.ops.scan import QueueScan
from jobkit.ops.scope import Scope
from jobkit.records import RecordsBackend
from jobkit.sqs import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, QueueDirectory, message_size, sendable_attributes

log = logging.getLogger(__name__)

#: How long a message being copied stays hidden in the DLQ: enough for a send and a delete.
REDRIVE_VISIBILITY_S = 120

Progress = Callable[[int], None]


@dataclass
class RedriveReport:
    """What a redrive did (or, with ``dry_run``, would do).

    Attributes:
        mode: ``native`` (a move task was started), ``copy`` or ``dry_run``.
        moved: messages sent back and deleted from the DLQ.
        matched: the messages selected (copy and dry run).
        not_sent: (message ID, error) of messages that stay in the DLQ.
        not_deleted: message IDs sent back but still in the DLQ too.
        task_handle: the native move task.
        approximate: the DLQ's message count when a native task started.
        native_unavailable: why a whole-queue redrive fell back to copying.
    """

    mode: str
    scope: Scope
    moved: int = 0
    matched: list[DeadLetter] = field(default_factory=list)
    not_sent: list[tuple[str, str]] = field(default_factory=list)
    not_deleted: list[str] = field(default_factory=list)
    task_handle: str | None = None
    approximate: int | None = None
    native_unavailable: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "dlq": self.scope.dlq_name,
            "queue": self.scope.sqs_name,
            "matched": len(self.matched) if self.mode != "native" else None,
            "moved": self.moved,
            "job_ids": [d.job_id for d in self.matched],
            "not_sent": [{"message_id": m, "error": e} for m, e in self.not_sent],
            "not_deleted": self.not_deleted,
            "task_handle": self.task_handle,
            "approximate": self.approximate,
            "native_unavailable": self.native_unavailable,
        }


def redrive(
    sqs: Any,
    directory: QueueDirectory,
    scope: Scope,
    *,
    records: RecordsBackend | None = None,
    ids: Sequence[str] = (),
    error_contains: str | None = None,
    dry_run: bool = False,
    on_progress: Progress | None = None,
) -> RedriveReport:
    """Send a scope's dead letters back to its queue.

    Args:
        records: the jobs table, to match ``error_contains`` against messages
            whose error only a failure record knows.
        ids: only these job or message IDs.
        error_contains: only messages whose last error contains this (case-insensitive).
        dry_run: change nothing; report what would be moved.
        on_progress: called with the running count of moved messages.
    """
    if dry_run:
        listing = list_dead_letters(sqs, directory, scope, records=records, limit=None)
        matched = [d for d in listing.items if d.matches(ids, error_contains)]
        return RedriveReport("dry_run", scope, matched=matched)
    from botocore.exceptions import BotoCoreError, ClientError

    native_unavailable = None
    if scope.whole_queue and not ids and error_contains is None:
        try:
            return _start_move_task(sqs, directory, scope)
        except NotImplementedError as exc:  # moto, in-process, has no StartMessageMoveTask
            native_unavailable = f"StartMessageMoveTask is not implemented here: {exc}"
        except (ClientError, BotoCoreError) as exc:  # no permission, an emulator's 500, a task running
            native_unavailable = f"StartMessageMoveTask failed: {exc}"
        log.info("%s; copying messages instead", native_unavailable)
    report = _copy(sqs, directory, scope, records, ids, error_contains, on_progress)
    report.native_unavailable = native_unavailable
    return report


def _start_move_task(sqs: Any, directory: QueueDirectory, scope: Scope) -> RedriveReport:
    queue_url, dlq_url = scope.urls(directory)
    dlq = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn", "ApproximateNumberOfMessages"])
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # The destination is explicit: the runner *sends* its dead letters to the
    # DLQ, so SQS does not know their source queue.
    response = sqs.start_message_move_task(SourceArn=dlq["Attributes"]["QueueArn"], DestinationArn=queue_arn)
    return RedriveReport(
        "native",
        scope,
        task_handle=response["TaskHandle"],
        approximate=int(dlq["Attributes"]["ApproximateNumberOfMessages"]),
    )


def _copy(
    sqs: Any,
    directory: QueueDirectory,
    scope: Scope,
    records: RecordsBackend | None,
    ids: Sequence[str],
    error_contains: str | None,
    on_progress: Progress | None,
) -> RedriveReport:
    queue_url, dlq_url = scope.urls(directory)
    report = RedriveReport("copy", scope)
    with QueueScan(sqs, dlq_url, visibility_timeout_s=REDRIVE_VISIBILITY_S) as scan:
        for batch in scan.batches():
            chosen = []
            for message in batch:
                dead = dead_letter(message)
                if not scope.includes(dead.job_type):
                    continue
                if error_contains is not None:
                    dead = with_failures(dead, records)
                if dead.matches(ids, error_contains):
                    chosen.append(dead)
            report.matched.extend(chosen)
            for group in _send_groups(chosen):
                sent = _send(sqs, queue_url, group, report)
                deleted = _delete(sqs, dlq_url, sent, report)
                scan.forget(deleted)
                report.moved += len(deleted)
                if on_progress is not None:
                    on_progress(report.moved)
    return report


def _send_groups(chosen: Iterable[DeadLetter]) -> list[list[tuple[DeadLetter, dict[str, Any]]]]:
    """SendMessageBatch requests: at most 10 entries and 1 MiB each."""
    groups: list[list[tuple[DeadLetter, dict[str, Any]]]] = []
    size = 0
    for dead in chosen:
        attributes = sendable_attributes(dead.message_attributes)
        entry_size = message_size(dead.body, attributes)
        if not groups or len(groups[-1]) == MAX_BATCH_ENTRIES or size + entry_size > MAX_BATCH_BYTES:
            groups.append([])
            size = 0
        groups[-1].append((dead, attributes))
        size += entry_size
    return groups


def _send(
    sqs: Any, queue_url: str, group: list[tuple[DeadLetter, dict[str, Any]]], report: RedriveReport
) -> list[DeadLetter]:
    from botocore.exceptions import BotoCoreError, ClientError

    entries = [
        {"Id": str(n), "MessageBody": dead.body, "MessageAttributes": attributes}
        for n, (dead, attributes) in enumerate(group)
    ]
    try:
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    except (ClientError, BotoCoreError) as exc:  # nothing was sent: everything stays in the DLQ
        report.not_sent.extend((dead.message_id, str(exc)) for dead, _ in group)
        return []
    for failure in response.get("Failed", []):
        dead = group[int(failure["Id"])][0]
        report.not_sent.append((dead.message_id, f"{failure.get('Code')}: {failure.get('Message', '')}"))
    return [group[int(ok["Id"])][0] for ok in response.get("Successful", [])]


def _delete(sqs: Any, dlq_url: str, sent: list[DeadLetter], report: RedriveReport) -> list[str]:
    from botocore.exceptions import BotoCoreError, ClientError

    if not sent:
        return []
    entries = [{"Id": str(n), "ReceiptHandle": dead.receipt_handle} for n, dead in enumerate(sent)]
    try:
        response = sqs.delete_message_batch(QueueUrl=dlq_url, Entries=entries)
    except (ClientError, BotoCoreError):  # sent, not deleted: in both queues (at least once)
        report.not_deleted.extend(dead.message_id for dead in sent)
        return []
    report.not_deleted.extend(sent[int(f["Id"])].message_id for f in response.get("Failed", []))
    return [sent[int(ok["Id"])].message_id for ok in response.get("Successful", [])]
