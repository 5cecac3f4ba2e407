"""Cancellation: a job of a ``cancellable`` type that a cancellation covers is
acknowledged without running (outcome ``cancelled``, its reason saying who
cancelled it and when). The stage comes before the delay hop, so a delayed
job is dropped at its next hop, not when its delay ends. A job that runs gets
the check its ``self.cancelled()`` makes (:class:`jobkit.status.cancel.CancelWatch`).

One read per cancellable type of the batch (:mod:`jobkit.status.cancel`). If the
table cannot answer, the jobs go on (fail-open, as de-duplication does),
with a warning: a cancellation is then honoured at the job's next check.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.records import TableUnavailable
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Later, Stage
from jobkit.status.cancel import CancelCheck, CancelWatch, Cover

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class Cancel(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Cancel:
        return cls(CancelCheck(kit.table.records), kit.clock)

    def __init__(self, check: CancelCheck, clock: Clock) -> None:
        self._check = check
        self._clock = clock

    def admit_batch(self, deliveries: Sequence[Delivery]) -> Sequence[RecordResult | Later | None]:
        wanted = [d for d in deliveries if d.job_type.cancellable]
        if not wanted:
            return [None] * len(deliveries)
        now = self._clock.now()
        try:
            covers: list[Cover | None] = self._check.of_batch([d.spec for d in wanted])
        except TableUnavailable as exc:
            log.warning("could not read the batch's cancellations: its jobs go on: %s", exc)
            for delivery in wanted:
                delivery.dedup_unavailable = True
            covers = [None] * len(wanted)
        found = {id(d): cover for d, cover in zip(wanted, covers, strict=True)}
        results: list[RecordResult | Later | None] = []
        for delivery in deliveries:
            cover = found.get(id(delivery))
            if cover is not None:
                spec, why = delivery.spec, cover.reason
                log.info("%s %s cancelled", spec.type, spec.id, extra={**delivery.keys, "reason": why})
                results.append(delivery.result(Outcome.CANCELLED, reason=cover.reason))
                continue
            if id(delivery) in found:
                delivery.cancel_watch = CancelWatch(self._check, delivery.spec, self._clock, now)
            results.append(None)
        return results
