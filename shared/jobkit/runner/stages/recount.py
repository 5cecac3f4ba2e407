"""A job's last attempt, when some of its receives never ran it.

A type's ``max_attempts`` is its queue's ``maxReceiveCount``, so every receive
counts as an attempt. But a receive can be spent without running the job: its
batch died on an earlier job (a crash, out of memory), or Lambda was
throttled and the message came back after its visibility timeout. AWS's own
advice is headroom (a ``maxReceiveCount`` of at least 5); jobkit keeps the
count equal to the attempt limit, so the DLQ means "tried that many times",
and instead recounts before it spends the last one.

When a job reaches its last attempt on a message delivered more than once, the
runner reads the job's failure records (one query; a job that succeeds on an
earlier attempt never pays it). Every attempt that ran and failed wrote one
(or the deadline watchdog did). If fewer attempts reported than the count
says were made, the job is sent again at once, carrying the attempts that
reported: a deferral, not an attempt. A copy recounted once is never
recounted again, so a job that kills its own invocation every time (and so
never reports) reaches the DLQ after at most twice its attempts, with the
reason its final-attempt record gives.
"""

from __future__ import annotations

import logging

from jobkit.dedup import DedupStore
from jobkit.outcome import Outcome, RecordResult
from jobkit.records import DedupUnavailable
from jobkit.runner.delivery import Delivery, string_attribute_of
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Stage
from jobkit.sqs import RECOUNTED_ATTRIBUTE, string_attribute

log = logging.getLogger(__name__)


class Recount(Stage):
    def __init__(self, store: DedupStore, requeue: Requeue) -> None:
        self._store = store
        self._requeue = requeue

    def admit(self, delivery: Delivery) -> RecordResult | None:
        if delivery.attempt < delivery.job_type.max_attempts or delivery.receive_count < 2:
            return None
        if string_attribute_of(delivery.record, RECOUNTED_ATTRIBUTE):
            return None
        try:
            runs = self._store.runs(delivery.ref)
        except DedupUnavailable as exc:  # then the count stands, as SQS counts it
            log.warning("could not recount the attempts of the job: %s", exc, extra=delivery.keys)
            return None
        reported = len({failure.attempt for failure in runs.failures if failure.attempt < delivery.attempt})
        if reported >= delivery.attempt - 1:
            return None
        why = (
            f"recounted: {delivery.attempt - 1 - reported} of its {delivery.attempt - 1} receives never ran it"
            f" (a batch that died, or a throttled invocation); {reported} attempt(s) ran"
        )
        log.warning("%s; sent again with its attempts left", why, extra=delivery.keys)
        delivery.attempt = reported + 1  # the copy carries the attempts that ran
        return self._requeue(delivery, 0, Outcome.DEFERRED, why, {RECOUNTED_ATTRIBUTE: string_attribute("1")})
