"""A batch member's end, counted: when a member's record ends (it ran, was
skipped, cancelled or dead-lettered), its batch counts that end once
(:meth:`jobkit.records.batches.Batches.settle`), and if the batch has ended
the runner pushes its callbacks (:class:`jobkit.batches.control.BatchKeeper`).

The ends of one SQS batch are counted together, per batch, when the SQS
batch is done. A count (or a callback's push) that still fails after a few
tries sends the member's message back (a batch item failure; each copy of
it, if SQS delivered it twice in the batch): its redelivery
counts the end again, a ``deliver_once`` member without running again, any
other member by running again, as after a crash. A
dead-lettered member's end that cannot be counted stays pending: its dead
letter, redriven, ends it again. Ends that were counted, but whose batch's
callbacks could not be pushed, with no message of their own to send back
(dead-lettered members'), send the runner's queue a check of the batch
(:mod:`jobkit.jobs.batch_check`), which this stage answers when it comes.
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
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.jobs.batch_check import BATCH_CHECK_TYPE, BATCH_PARAM
from jobkit.records import BATCH_RECORD_TTL_S
from jobkit.records.batches import FAILURES, BatchRef, Member
from jobkit.runner.delivery import Delivery, QueuePort
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.jobs.job import QueueGroup
    from jobkit.records.store import Records
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)

#: Tries of a batch's count before its members' messages go back, and the waits between them.
_WAITS_S = (0.1, 0.4)
#: When a batch's check comes (:mod:`jobkit.jobs.batch_check`).
CHECK_DELAY_S = 60


class BatchSettle(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> BatchSettle:
        return cls(kit.table.records, kit.clock, kit.group_factory, kit.queue.timeout_s, kit.queues)

    def __init__(
        self,
        records: Records,
        clock: Clock,
        group_factory: Callable[[str | None], QueueGroup] | None,
        claim_s: float,
        queues: QueuePort,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._records = records
        self._queues = queues
        self._clock = clock
        self._groups = group_factory
        self._claim_s = claim_s
        self._sleep = sleep
        self._lock = threading.Lock()
        #: Per batch, each member's end (the last one settled, unless a failure after a run) and every
        #: delivery of it in this SQS batch (SQS may deliver one message twice in one): each goes back
        #: if the end is not counted.
        self._ends: dict[BatchRef, dict[Member, tuple[str, list[tuple[str, Delivery | None]]]]] = {}

    def begin_batch(self) -> None:
        self._ends = {}

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        end = end_of(result)
        if delivery is not None and delivery.spec.batch is not None and end is not None:
            spec = delivery.spec
            ref, member = BatchRef(str(spec.batch), spec.domain), Member(spec.type, spec.id)
        elif delivery is None and result.batch is not None and result.job_id is not None and end is not None:
            # poisoned, or a large job's late copy
            ref, member = BatchRef(result.batch, result.domain), Member(result.job_type, result.job_id)
        else:
            return
        with self._lock:
            members = self._ends.setdefault(ref, {})
            kept, copies = members.get(member, (end, []))
            # (a copy's own end decides whether its message goes back; another copy that ran, or was
            # skipped, decides the member's end over one that failed)
            members[member] = (kept if end in FAILURES and kept not in FAILURES else end, [*copies, (end, delivery)])

    def admit(self, delivery: Delivery) -> RecordResult | None:
        """A batch's check (:mod:`jobkit.jobs.batch_check`): check it now; if that fails
        again, its job runs, and fails, and is retried like any job."""
        if delivery.spec.type != BATCH_CHECK_TYPE:
            return None
        ref = BatchRef(str(delivery.spec.params.get(BATCH_PARAM)), delivery.spec.domain)
        try:
            pushed = self._keeper(ref).push_due(ref)
        except JobKitError as exc:
            log.warning("batch %s: could not check it (%s): tried again", ref.batch_id, exc, extra=delivery.keys)
            return None
        return delivery.result(Outcome.SUCCEEDED, reason=f"checked batch {ref.batch_id}: pushed {pushed or 'nothing'}")

    def end_batch(self) -> None:
        ends, self._ends = self._ends, {}
        for ref, members in ends.items():
            counted, error = self._count(ref, {member: end for member, (end, _) in members.items()})
            if error is None:
                continue
            copies = [copy for _, member_copies in members.values() for copy in member_copies]
            back = [d for end, d in copies if end != "dead_lettered" and d is not None]
            # a large job's late copy has no message to send back: its end was counted before its object was removed
            late = any(d is None and end != "dead_lettered" for end, d in copies)
            if (counted or late) and not back:  # counted, its callbacks not pushed, and no message can go back
                self._send_check(ref, error)
                continue
            for delivery in back:
                delivery.send_back = f"its batch {ref.batch_id} could not count its end: {error}"
            log.error(
                "batch %s: could not %s (%s); %d message(s) go back to do it again%s",
                ref.batch_id,
                "push its callbacks" if counted else f"count {len(members)} member end(s)",
                error,
                len(back),
                ", and its dead-lettered members stay pending until redriven"
                if not counted and len(back) < len(copies)
                else "",
                extra={"batch": ref.batch_id, "domain": ref.domain},
            )

    def _count(self, ref: BatchRef, ends: dict[Member, str]) -> tuple[bool, str | None]:
        """Count the ends, then push the callbacks due: whether the ends were
        counted, and the error if either failed every try."""
        error, counted = "", False
        for wait in (*_WAITS_S, None):
            now = self._clock.now()
            try:
                if not counted:
                    self._warn_unknown(ref, self._records.batches.settle(ref, ends, now, int(now) + BATCH_RECORD_TTL_S))
                    counted = True
                self._keeper(ref).push_due(ref)
                return True, None
            except Exception as exc:  # (any error: the members' messages go back, their objects kept)
                error = f"{type(exc).__name__}: {exc}"
            if wait is not None:
                self._sleep(wait)
        return counted, error

    def _send_check(self, ref: BatchRef, error: str) -> None:
        """Send the runner's own queue a check of the batch, for a minute from now."""
        now = self._clock.now()
        check = JobSpecification(BATCH_CHECK_TYPE, {BATCH_PARAM: ref.batch_id}, domain=ref.domain).stamped(now)
        record = {"messageId": f"check-{check.id}", "body": check.to_message(), "messageAttributes": {}}
        try:
            self._queues.requeue(record, CHECK_DELAY_S)
        except Exception as exc:
            log.error(
                "batch %s: counted its last end, but could not push its callbacks (%s), nor send itself a check"
                " (%s): seal it again, or redrive a member, to push them",
                ref.batch_id,
                error,
                exc,
                extra={"batch": ref.batch_id, "domain": ref.domain},
            )
            return
        log.warning(
            "batch %s: could not push its callbacks (%s): checks it again in %d s",
            ref.batch_id,
            error,
            CHECK_DELAY_S,
            extra={"batch": ref.batch_id, "domain": ref.domain},
        )

    @staticmethod
    def _warn_unknown(ref: BatchRef, unknown: list[Member]) -> None:
        if unknown:
            log.warning(
                "batch %s never counted in %s: sent as members without a push, they end without being"
                " counted (push members with jobkit, or through the push endpoint)",
                ref.batch_id,
                ", ".join(f"{m.job_type} {m.job_id}" for m in unknown[:5]),
                extra={"batch": ref.batch_id, "domain": ref.domain},
            )

    def _keeper(self, ref: BatchRef) -> BatchKeeper:
        if self._groups is None:
            raise JobKitError("this runner has no push group to push a batch's callbacks with")
        group = self._groups(ref.domain)  # (its declaration: the lanes its callbacks and steps go to)
        return BatchKeeper(self._records, self._clock, group.push, claim_s=self._claim_s, declaration=group.declaration)
