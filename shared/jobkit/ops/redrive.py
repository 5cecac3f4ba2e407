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

A redriven job starts its attempts again, with the type's full
``max_attempts``: SQS counts a redriven message's receives afresh (a copy is
a new message; a native move gives each message a new message ID too), and
the only other count of attempts, the one the runner keeps for a job it
deferred (in the jobs table, under the deferred message's own message ID,
which its ``jobkit.deferred`` attribute points to), belongs to a message ID
the redriven message no longer has. The copy also drops every ``jobkit.*``
attribute (the old dead-letter reason and the deferral marker); a native move
keeps them, which is harmless: the runner never reads a reason from a
message, a marker whose message ID has no deferral record counts no
attempts, and a hold's attribute on a message sent long after the hold
counts no hold (:func:`jobkit.runner.hold.held_before`). The body is sent
back unchanged, and so is the ``MessageGroupId`` (the job's tenant in a fair
queue; a native move keeps it too). The copy carries one ``jobkit.*``
attribute of its own: when SQS first saw the job (:mod:`jobkit.sqs.first_seen`),
so a redriven job is ordered by when it was pushed, never by the redrive.

Which messages go: a TYPE on a shared queue selects by the type its body
names (never by the ``JobType`` attribute); a message that is not a job is
redriven by naming the queue, or by its message ID (``--id``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobkit.ops.dead_letters import DeadLetter, dead_letter, judged, list_dead_letters
from jobkit.ops.scan import QueueScan
from jobkit.ops.scope import Scope
from jobkit.sqs import Outgoing, QueueDirectory, delete_in_chunks, pack_batches, send_batch
from jobkit.sqs.attributes import copy_attributes

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from jobkit.records.store import Records

log = logging.getLogger(__name__)

#: How long a message being copied stays hidden in the DLQ: enough for a send and a delete.
REDRIVE_VISIBILITY_S = 120

Progress = Callable[[int], None]
#: Lifts the cancellations of a dead letter's push: the dead letter, and the message it was received as.
Uncancel = Callable[[DeadLetter, Mapping[str, Any]], None]


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
            "message_ids": [d.message_id for d in self.matched],
            "not_sent": [{"message_id": m, "error": e} for m, e in self.not_sent],
            "not_deleted": self.not_deleted,
            "task_handle": self.task_handle,
            "approximate": self.approximate,
            "native_unavailable": self.native_unavailable,
        }


def redrive(
    sqs: SQSClient,
    directory: QueueDirectory,
    scope: Scope,
    *,
    records: Records | None = None,
    ids: Sequence[str] = (),
    error_contains: str | None = None,
    dry_run: bool = False,
    on_progress: Progress | None = None,
    now: float | None = None,
    message_ids_only: bool = False,
    uncancel: Uncancel | None = None,
) -> RedriveReport:
    """Send a scope's dead letters back to its queue.

    Args:
        records: the jobs table, where ``error_contains`` finds each job's
            verified error (never in the message's own attributes).
        ids: only these job or message IDs.
        error_contains: only messages whose verified last error contains this (case-insensitive).
        dry_run: change nothing; report what would be moved.
        on_progress: called with the running count of moved messages.
        now: the time for the tool's own checks of a job (default: the system clock).
        message_ids_only: ``ids`` are message IDs alone (see :meth:`DeadLetter.selected`).
        uncancel: lifts the cancellation of each job before it is sent back
            (``--uncancel``); a copy redrive then, as it names each job.
    """
    now = time.time() if now is None else now
    if dry_run:
        listing = list_dead_letters(
            sqs, directory, scope, records=records, now=now, limit=None, ids=ids, message_ids_only=message_ids_only
        )
        matched = [d for d in listing.items if d.error_matches(error_contains)]
        return RedriveReport("dry_run", scope, matched=matched)
    from botocore.exceptions import BotoCoreError, ClientError

    native_unavailable = None
    if scope.whole_queue and not ids and error_contains is None and uncancel is None:
        try:
            return _start_move_task(sqs, directory, scope)
        except NotImplementedError as exc:  # moto, in-process, has no StartMessageMoveTask
            native_unavailable = f"StartMessageMoveTask is not implemented here: {exc}"
        except (ClientError, BotoCoreError) as exc:  # no permission, an emulator's 500, a task running
            native_unavailable = f"StartMessageMoveTask failed: {exc}"
        log.info("%s; copying messages instead", native_unavailable)
    choose = _Filter(records, ids, error_contains, now, message_ids_only)
    report = _copy(sqs, directory, scope, choose, on_progress, uncancel)
    report.native_unavailable = native_unavailable
    return report


def _start_move_task(sqs: SQSClient, directory: QueueDirectory, scope: Scope) -> RedriveReport:
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


@dataclass(frozen=True)
class _Filter:
    """Which dead letters of a scope a copy redrive takes."""

    records: Records | None
    ids: Sequence[str]
    error_contains: str | None
    now: float
    message_ids_only: bool = False

    def chosen(self, scope: Scope, batch: Iterable[Mapping[str, Any]]) -> list[DeadLetter]:
        chosen = []
        for message in batch:
            dead = dead_letter(message)
            if not dead.selected(scope, self.ids, message_ids_only=self.message_ids_only):
                continue
            if self.error_contains is not None:  # only then is the verified error needed
                dead = judged(dead, scope, self.records, now=self.now)
            if dead.error_matches(self.error_contains):
                chosen.append(dead)
        return chosen


def _copy(
    sqs: SQSClient,
    directory: QueueDirectory,
    scope: Scope,
    choose: _Filter,
    on_progress: Progress | None,
    uncancel: Uncancel | None = None,
) -> RedriveReport:
    queue_url, dlq_url = scope.urls(directory)
    report = RedriveReport("copy", scope)
    with QueueScan(sqs, dlq_url, visibility_timeout_s=REDRIVE_VISIBILITY_S) as scan:
        for batch in scan.batches():
            chosen = choose.chosen(scope, batch)
            report.matched.extend(chosen)
            received = {message["MessageId"]: message for message in batch}
            if uncancel is not None:  # before the send: a copy must not meet its cancellation
                for dead in chosen:
                    if dead.spec is not None:
                        uncancel(dead, received[dead.message_id])
            copies = [
                Outgoing(
                    dead,
                    queue_url,
                    dead.body,
                    # with when SQS first saw the job: ordering never uses the redrive's time
                    copy_attributes(dead.body, received[dead.message_id]),
                    group_id=(received[dead.message_id].get("Attributes") or {}).get("MessageGroupId") or None,
                )
                for dead in chosen
            ]
            for group in pack_batches(copies):
                sent = _send(sqs, group, report)
                deleted = _delete(sqs, dlq_url, sent, report)
                scan.forget(deleted)
                report.moved += len(deleted)
                if on_progress is not None:
                    on_progress(report.moved)
    return report


def _send(sqs: SQSClient, group: list[Outgoing[DeadLetter]], report: RedriveReport) -> list[DeadLetter]:
    """Send copies; one not sent stays in the DLQ."""
    result = send_batch(sqs, group)
    for failure in result.failed:
        error = str(failure.exception) if failure.exception is not None else f"{failure.code}: {failure.error}"
        report.not_sent.append((failure.outgoing.item.message_id, error))
    return [copy.item for copy in result.sent]


def _delete(sqs: SQSClient, dlq_url: str, sent: list[DeadLetter], report: RedriveReport) -> list[str]:
    """Delete the dead letters that were sent; one not deleted is in both queues (at least once)."""
    from botocore.exceptions import BotoCoreError, ClientError

    deleted: list[str] = []
    for chunk in delete_in_chunks(
        sqs, dlq_url, sent, lambda dead: dead.receipt_handle, catching=(ClientError, BotoCoreError)
    ):
        if chunk.error is not None:
            report.not_deleted.extend(dead.message_id for dead in chunk.items)
            continue
        report.not_deleted.extend(dead.message_id for dead, _ in chunk.failed)
        deleted.extend(dead.message_id for dead in chunk.done)
    return deleted
