"""How a job of a ``cancellable`` type ends ``cancelled`` once the runner
admitted it: its cancellation came while it waited for its turn in the batch
(checked again just before it starts, when its batch's check is 5 s old), or
while it ran and it stopped when it saw it (:mod:`jobkit.runner.stages.cancel`
covers the jobs a cancellation covers when their batch is received)."""

from __future__ import annotations

import logging

from jobkit.core.errors import JobCancelled
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Run

log = logging.getLogger("jobkit.runner.loop")


def cancelled_before_start(delivery: Delivery) -> RecordResult | None:
    """The job's result if its cancellation came while it waited for its turn in
    the batch (checked again when its batch's check is 5 s old); ``None``: it starts.
    Its admission's claims go back when the stages settle it."""
    watch = delivery.cancel_watch
    if watch is None or not watch():
        if watch is not None and watch.unread:
            delivery.dedup_unavailable = True  # it goes on unchecked, and says so
        return None
    why = watch.seen.reason if watch.seen is not None else "cancelled"
    log.info("%s %s cancelled", delivery.spec.type, delivery.spec.id, extra={**delivery.keys, "reason": why})
    return delivery.result(Outcome.CANCELLED, reason=why)


def stopped_by_cancel(delivery: Delivery, run: Run) -> str | None:
    """Why the job ended ``cancelled``, if it did: it returned after its
    ``self.cancelled()`` said True, or it raised :class:`JobCancelled` and a
    cancellation covers it (one read, if it had not seen one). A job that
    raises it with no cancellation (or of a type that is not cancellable) failed."""
    watch = delivery.cancel_watch
    if watch is None:
        return None
    if isinstance(run.error, JobCancelled) and watch.seen is None:
        watch(now_or_never=True)
    if watch.seen is None or not (run.error is None or isinstance(run.error, JobCancelled)):
        return None
    return watch.seen.reason + "; it stopped when it saw it"
