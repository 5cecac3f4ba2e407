"""A job's last attempt, when some of its receives never ran it.

A type's ``max_attempts`` is its queue's ``maxReceiveCount``, so every receive
counts as an attempt. But a receive can be spent without running the job: its
batch died on an earlier job (a crash, out of memory), or Lambda was
throttled and the message came back after its visibility timeout. AWS's own
advice is headroom (a ``maxReceiveCount`` of at least 5); jobkit keeps the
count equal to the attempt limit, so the DLQ means "tried that many times",
and instead recounts before it spends the last one.

When a job reaches its last attempt after earlier ones (on a message delivered
again, or a copy carrying attempts it used), the runner reads the job's
failure records (one query; a job that succeeds on an
earlier attempt never pays it). Every attempt that ran and failed wrote one
(or the deadline watchdog did); a receive the runner could not re-enqueue
wrote one that says it did not run. If fewer attempts ran than the count
says, the job is sent again at once, carrying the attempts that ran: a
deferral, not an attempt. A job is recounted once: the copy's record in the
jobs table (under its message ID, which no sender can write and a redrive
does not keep) says so, and every later copy keeps it. So a job that kills
its own invocation every time (and so never reports) reaches the DLQ after at
most twice its attempts, with the reason its final-attempt record gives. If
the copy cannot be sent, this receive is the last attempt after all.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobkit.core.outcome import Outcome, RecordResult
from jobkit.records import TableUnavailable
from jobkit.records.journal import AttemptJournal
from jobkit.runner.delivery import Delivery
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class Recount(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Recount:
        return cls(kit.table.journal, parts.requeue)

    def __init__(self, journal: AttemptJournal, requeue: Requeue) -> None:
        self._journal = journal
        self._requeue = requeue

    def admit(self, delivery: Delivery) -> RecordResult | None:
        # (a job on its first attempt has no earlier receive to recount)
        if delivery.attempt < max(2, delivery.job_type.max_attempts) or delivery.recounted:
            return None
        try:
            runs = self._journal.runs(delivery.ref, limit=delivery.attempt)
        except TableUnavailable as exc:  # then the count stands, as SQS counts it
            log.warning("could not recount the attempts of the job: %s", exc, extra=delivery.keys)
            return None
        ran = {failure.attempt for failure in runs.failures if failure.ran and failure.attempt < delivery.attempt}
        if len(ran) >= delivery.attempt - 1:
            return None
        why = (
            f"recounted: {delivery.attempt - 1 - len(ran)} of its {delivery.attempt - 1} receives never ran it"
            f" (a batch that died, or a throttled invocation); {len(ran)} attempt(s) ran"
        )
        counted = delivery.attempt
        delivery.attempt = len(ran) + 1  # the copy carries the attempts that ran
        try:
            self._requeue.send(delivery, 0, recounted=True)
        except Exception as exc:  # this receive is the last attempt after all
            log.warning("could not send the recounted job again (%s): running it now", exc, extra=delivery.keys)
            delivery.attempt = counted
            return None
        log.warning("%s; sent again with its attempts left", why, extra=delivery.keys)
        return delivery.result(Outcome.DEFERRED, reason=why)
