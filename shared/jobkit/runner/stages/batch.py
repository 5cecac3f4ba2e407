"""A batch member's end, counted: when a member's record ends (it ran, was
skipped, cancelled or dead-lettered), its batch counts that end once
(:meth:`jobkit.records.batches.Batches.settle`), and if the batch has ended
the runner pushes its callbacks (:class:`jobkit.batches.control.BatchKeeper`).

The ends of one SQS batch are counted together, per batch, when the SQS
batch is done. A count (or a callback's push) that still fails after a few
tries sends the member's message back (a batch item failure): its redelivery
counts the end again, a ``deliver_once`` or ``track_status`` member without
running again, any other member by running again, as after a crash. A
dead-lettered member's end that cannot be counted stays pending: its dead
letter, redriven, ends it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from jobkit.batches.control import BatchKeeper, end_of
from jobkit.core.clock import Clock
from jobkit.core.errors import JobKitError
from jobkit.core.outcome import RecordResult
from jobkit.records import BATCH_RECORD_TTL_S
from jobkit.records.batches import BatchRef, Member
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.jobs.job import QueueGroup
    from jobkit.records.store import Records
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)

#: Tries of a batch's count before its members' messages go back, and the waits between them.
_WAITS_S = (0.1, 0.4)


class BatchSettle(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> BatchSettle:
        return cls(kit.table.records, kit.clock, kit.group_factory, kit.queue.timeout_s)

    def __init__(
        self,
        records: Records,
        clock: Clock,
        group_factory: Callable[[str | None], QueueGroup] | None,
        claim_s: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._records = records
        self._clock = clock
        self._groups = group_factory
        self._claim_s = claim_s
        self._sleep = sleep
        self._lock = threading.Lock()
        self._ends: dict[BatchRef, dict[Member, tuple[str, Delivery]]] = {}

    def begin_batch(self) -> None:
        self._ends = {}

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        if delivery is None or delivery.spec.batch is None:
            return
        end = end_of(result)
        if end is None:
            return
        ref = BatchRef(delivery.spec.batch, delivery.spec.domain)
        with self._lock:
            self._ends.setdefault(ref, {})[Member(delivery.spec.type, delivery.spec.id)] = (end, delivery)

    def end_batch(self) -> None:
        ends, self._ends = self._ends, {}
        for ref, members in ends.items():
            error = self._count(ref, {member: end for member, (end, _) in members.items()})
            if error is None:
                continue
            back = [d for end, d in members.values() if end != "dead_lettered"]
            for delivery in back:
                delivery.send_back = f"its batch {ref.batch_id} could not count its end: {error}"
            log.error(
                "batch %s: could not count %d member end(s) (%s); %d message(s) go back to count it again%s",
                ref.batch_id,
                len(members),
                error,
                len(back),
                ", and its dead-lettered members stay pending until redriven" if len(back) < len(members) else "",
                extra={"batch": ref.batch_id, "domain": ref.domain},
            )

    def _count(self, ref: BatchRef, ends: dict[Member, str]) -> str | None:
        """Count the ends, and push the callbacks due; the error if that failed every try."""
        error = ""
        for wait in (*_WAITS_S, None):
            now = self._clock.now()
            try:
                unknown = self._records.batches.settle(ref, ends, now, int(now) + BATCH_RECORD_TTL_S)
                if unknown:
                    log.warning(
                        "batch %s never counted in %s: sent as members without a push, they end without being"
                        " counted (push members with jobkit, or through the push endpoint)",
                        ref.batch_id,
                        ", ".join(f"{m.job_type} {m.job_id}" for m in unknown[:5]),
                        extra={"batch": ref.batch_id, "domain": ref.domain},
                    )
                self._keeper(ref).push_due(ref)
                return None
            except JobKitError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if wait is not None:
                self._sleep(wait)
        return error

    def _keeper(self, ref: BatchRef) -> BatchKeeper:
        if self._groups is None:
            raise JobKitError("this runner has no push group to push a batch's callbacks with")
        return BatchKeeper(self._records, self._clock, self._groups(ref.domain).push, claim_s=self._claim_s)
