"""Cancellation: a job of a ``cancellable`` type that a cancellation covers is
acknowledged without running (outcome ``cancelled``, its reason saying who
cancelled it and when). The stage comes before the delay hop, so a delayed
job is dropped at its next hop, not when its delay ends. A job that runs gets
the check its ``self.cancelled()`` makes (:class:`jobkit.status.cancel.CancelWatch`),
which the runner also makes just before a job starts when its batch's check
is :data:`~jobkit.status.cancel.CHECK_EVERY_S` old.

A covered job whose records say this very push already ran to success (a
``deliver_once`` job's delivery claim, a ``track_status`` job's status) is a
redelivery after its run, not a cancelled job: the cancellation came too late.

One read per cancellable type of the batch (:mod:`jobkit.status.cancel`). A
job whose cancellations cannot be read goes on (fail-open, as de-duplication
does), with a warning, and its result says the table was unavailable.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.records import JobState, TableUnavailable
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Later, Stage
from jobkit.status.cancel import UNREAD, CancelCheck, CancelWatch, Cover

if TYPE_CHECKING:
    from jobkit.records.store import Records
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class Cancel(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Cancel:
        return cls(kit.table.records, kit.clock)

    def __init__(self, records: Records, clock: Clock) -> None:
        self._records = records
        self._check = CancelCheck(records)
        self._clock = clock

    def admit_batch(self, deliveries: Sequence[Delivery]) -> Sequence[RecordResult | Later | None]:
        wanted = [d for d in deliveries if d.job_type.cancellable]
        if not wanted:
            return [None] * len(deliveries)
        now = self._clock.now()
        verdicts = self._check.of_batch([d.push for d in wanted])
        found = {id(d): verdict for d, verdict in zip(wanted, verdicts, strict=True)}
        results: list[RecordResult | Later | None] = []
        for delivery in deliveries:
            verdict = found.get(id(delivery))
            if id(delivery) not in found:
                results.append(None)
                continue
            if verdict is UNREAD:
                delivery.dedup_unavailable = True
            elif verdict is not None:
                results.append(self._covered(delivery, verdict))
                continue
            delivery.cancel_watch = CancelWatch(self._check, delivery.push, self._clock, now)
            results.append(None)
        return results

    def _covered(self, delivery: Delivery, cover: Cover) -> RecordResult:
        spec = delivery.spec
        if self._ran_already(delivery):
            why = f"it ran already; {cover.reason} came after"
            log.info("%s %s redelivered", spec.type, spec.id, extra={**delivery.keys, "reason": why})
            return delivery.result(Outcome.REDELIVERED, reason=why)
        log.info("%s %s cancelled", spec.type, spec.id, extra={**delivery.keys, "reason": cover.reason})
        return delivery.result(Outcome.CANCELLED, reason=cover.reason)

    def _ran_already(self, delivery: Delivery) -> bool:
        """Whether this push's records say it ran to success (a lost delete, a copy)."""
        job_type = delivery.job_type
        try:
            if job_type.deliver_once and self._records.delivery_ended(delivery.ref) is not None:
                return True
            if job_type.track_status:
                status = self._records.status_of(delivery.ref)
                return (
                    status is not None
                    and status.state is JobState.SUCCEEDED
                    and status.enqueued_at is not None
                    and status.enqueued_at == delivery.stamped_at
                )
        except TableUnavailable:
            return False  # cancelled: a job that already ran loses nothing more
        return False
