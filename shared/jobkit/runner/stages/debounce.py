"""Debounce: of the jobs of one type, domain and key pushed within the wait,
the latest runs and the earlier ones are acknowledged as ``debounced``
(:mod:`jobkit.records.debounce_windows`).

On its first delivery a job registers as its window's latest and is sent
again after the wait, as a delay hop (not an attempt), carrying the debounce
attribute (the message that registered it). On its return it claims the run:
it runs if its registration is still the latest, or if the key has waited
``max_wait_s`` since its window opened; otherwise it is debounced. Of a
batch's jobs with one window, only the one pushed last registers; the others
are debounced by it at once. Jobs are ordered by when they were pushed
(:attr:`Delivery.pushed_at`), whatever copy of them arrives.

A job is only debounced by a job that will run, or end for a reason that
covers it too: a job whose root is already superseded is skipped as
superseded before it can register (it never takes a window), and a job that
took its window runs even if a newer root is recorded while it waits
(:attr:`Delivery.owes_run`): the jobs it debounced are owed that run. So
does a job that took its window on a delivery whose wait was never sent (the
invocation died, or the send failed): delivered again after its root was
superseded, it keeps the window it holds, and only that. A job that claimed
the run keeps owing it on its retries, holds and recounted copies, even once a
job its run could not cover has opened a new window over its own.

When the jobs table cannot be reached, the type's ``if_unavailable`` decides:
``run`` (the default: the job runs, undebounced) or ``defer``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.parallel import Parallel
from jobkit.core.spec import JobSpecification
from jobkit.dedup.admission import SUPERSEDED_REASON, Admission, Verdict
from jobkit.records import TableUnavailable
from jobkit.records.debounce_windows import Debounced, DebounceWindows, Registered, job_ref
from jobkit.records.keys import Push
from jobkit.runner.delivery import Delivery, string_attribute_of
from jobkit.runner.hold import Hold
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Later, Stage
from jobkit.sqs import DEBOUNCE_ATTRIBUTE, string_attribute
from jobkit.status.cancel import UNREAD, CancelCheck

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)

#: Whether a newer root than a job's own is recorded (a read, never a write);
#: raises :class:`TableUnavailable` when the table cannot say.
RootCheck = Callable[[JobSpecification], bool]
#: For a deliver_once job: the skip it gets because its job ID already ran, or
#: None (a read); raises :class:`TableUnavailable` when the table cannot say.
DeliveredCheck = Callable[[JobSpecification], Admission | None]

#: (type, domain, key): one debounce window.
Window = tuple[str, str | None, str]


@dataclass(frozen=True)
class _Step:
    delivery: Delivery
    key: str
    registered: bool  # it came back from its wait: it claims the run
    stale: bool = False  # its root is superseded: it may only keep a window it already took


class DebounceStage(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> DebounceStage:
        table = kit.table
        dedup = table.dedup
        return cls(
            table.records.debounce_windows,
            kit.clock,
            parts.requeue,
            parts.hold,
            dedup.parallel,
            dedup.superseded,
            dedup.already_delivered,
            CancelCheck(table.records) if kit.any_type("cancellable") else None,
        )

    def __init__(
        self,
        windows: DebounceWindows,
        clock: Clock,
        requeue: Requeue,
        hold: Hold,
        parallel: Parallel,
        superseded: RootCheck,
        delivered: DeliveredCheck | None = None,
        cancellations: CancelCheck | None = None,
    ) -> None:
        self._windows = windows
        self._clock = clock
        self._requeue = requeue
        self._hold = hold
        self._parallel = parallel
        self._superseded = superseded
        self._delivered = delivered
        self._cancellations = cancellations

    def admit_batch(self, deliveries: Sequence[Delivery]) -> list[RecordResult | Later | None]:
        answers: list[RecordResult | Later | None] = [None] * len(deliveries)
        steps: list[tuple[list[int], _Step]] = []
        newcomers: dict[Window, list[int]] = {}
        for index, delivery in enumerate(deliveries):
            debounce = delivery.job_type.debounce
            if debounce is None:
                continue
            key = debounce.key.value(delivery.spec)
            if string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE):
                steps.append(([index], _Step(delivery, key, registered=True)))
            else:
                newcomers.setdefault((delivery.spec.type, delivery.spec.domain, key), []).append(index)
        ran_before = self._done([deliveries[i] for indexes in newcomers.values() for i in indexes])
        for indexes in newcomers.values():
            for index in [i for i in indexes if deliveries[i] in ran_before]:
                answers[index] = ran_before[deliveries[index]]
            indexes[:] = [i for i in indexes if deliveries[i] not in ran_before]
        stale = self._stale([deliveries[i] for indexes in newcomers.values() for i in indexes])
        for (_, _, key), indexes in newcomers.items():
            for index in indexes:
                if deliveries[index] not in stale:
                    continue
                if deliveries[index].receive_count > 1:  # an earlier delivery may have taken the window
                    steps.append(([index], _Step(deliveries[index], key, registered=False, stale=True)))
                else:  # it never takes the window
                    answers[index] = self._skip_superseded(deliveries[index])
            fresh = [i for i in indexes if deliveries[i] not in stale]
            if fresh:  # the one pushed last registers for all of them (the batch's order breaks ties)
                now = self._clock.now()
                ordered = sorted(fresh, key=lambda i: (_pushed_at(deliveries[i], now), i))
                steps.append((ordered, _Step(deliveries[ordered[-1]], key, registered=False)))
        done = self._in_turn([step for _, step in steps])
        for (indexes, step), answer in zip(steps, done, strict=True):
            answers[indexes[-1]] = answer
            for index in indexes[:-1]:
                answers[index] = self._behind(deliveries[index], step)
        return answers

    def _in_turn(self, steps: Sequence[_Step]) -> list[RecordResult | None]:
        """Each step's answer: the windows at once, but one window's steps one
        after another, its registrations before its claims. A second push of a
        job (or a later job) that registers while the first claims could
        otherwise find the window just run by its own ID and take it anew, and
        both would run; registering first, it is debounced by (or debounces)
        the job about to claim, as one job after another would be."""
        by_window: dict[Window, list[int]] = {}
        for index, step in enumerate(steps):
            spec = step.delivery.spec
            by_window.setdefault((spec.type, spec.domain, step.key), []).append(index)
        groups = [sorted(indexes, key=lambda i: steps[i].registered) for indexes in by_window.values()]
        answers: list[RecordResult | None] = [None] * len(steps)
        for group, done in zip(
            groups, self._parallel.map(self._steps, [[steps[i] for i in g] for g in groups]), strict=True
        ):
            for index, answer in zip(group, done, strict=True):
                answers[index] = answer
        return answers

    def _steps(self, steps: Sequence[_Step]) -> list[RecordResult | None]:
        return [self._step(step) for step in steps]

    def _behind(self, earlier: Delivery, step: _Step) -> RecordResult | None:
        """The answer for a job of the batch pushed before the one that registered for its window."""
        owner = step.delivery
        lost: Debounced | None = owner.noted(self)
        if lost is not None and lost.latest == job_ref(earlier.spec.domain, earlier.spec.id):
            # the job outside the batch that owns the run is this one (another delivery of
            # it registered): it is not debounced by itself, it claims its own run
            return self._step(_Step(earlier, step.key, registered=False))
        if lost is not None:  # a later job outside the batch owns the run
            if self._owner_cancelled(earlier, lost):
                return None  # its run was cancelled: this job is not folded into it
            same = lost.same_job and earlier.spec.id == owner.spec.id
            return self._debounced(earlier, lost.reason if same else f"job {lost.by} was pushed later", same=same)
        if owner.debounce_registration is not None:  # it registered (it waits, or runs now): they are its
            if earlier.spec.id == owner.spec.id:
                return self._debounced(earlier, "another delivery of this job ID owns the run", same=True)
            return self._debounced(earlier, f"job {_shown(owner)} was pushed later")
        return self._step(_Step(earlier, step.key, registered=False))  # it could not register: each its own way

    def admit(self, delivery: Delivery) -> RecordResult | None:
        debounce = delivery.job_type.debounce
        if debounce is None:
            return None
        registered = bool(string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE))
        done = {} if registered else self._done([delivery])
        if delivery in done:
            return done[delivery]
        stale = not registered and bool(self._stale([delivery]))
        if stale and delivery.receive_count == 1:
            return self._skip_superseded(delivery)
        return self._step(_Step(delivery, debounce.key.value(delivery.spec), registered, stale))

    def _done(self, deliveries: Sequence[Delivery]) -> dict[Delivery, RecordResult | None]:
        """The deliver_once deliveries that must not take a window, with their
        answer: a job ID that already ran, with its skip (the delivery claim would
        skip it, and the jobs it debounced would be owed a run that never comes);
        one the table could not tell about, with what the type's
        ``if_unavailable`` says (``None``: it goes on without debounce, and the
        delivery claim decides). One read each, for a type that both debounces
        and delivers once; none otherwise."""
        once = [d for d in deliveries if d.job_type.deliver_once] if self._delivered is not None else []
        if not once:
            return {}
        answers = self._parallel.map(self._ended, once)
        return {delivery: answer for delivery, (ended, answer) in zip(once, answers, strict=True) if ended}

    def _ended(self, delivery: Delivery) -> tuple[bool, RecordResult | None]:
        assert self._delivered is not None
        try:
            skip = self._delivered(delivery.spec)
        except TableUnavailable as exc:
            # Unknown: it must not take the window, or a skip by its delivery claim
            # would leave the jobs it debounced without their run.
            log.warning("delivery not checked before debounce: %s", exc, extra=delivery.keys)
            return True, self._unavailable(delivery)
        if skip is None:
            return False, None
        outcome = Outcome.REDELIVERED if skip.verdict is Verdict.REDELIVERED else Outcome.DUPLICATE
        log.info("job skipped (%s): %s", skip.verdict, skip.reason, extra=delivery.keys)
        return True, delivery.result(outcome, reason=skip.reason)

    def _unavailable(self, delivery: Delivery) -> RecordResult | None:
        """What a job whose window the table cannot tell about does: runs without
        debounce (``if_unavailable = "run"``), or is held back."""
        debounce = delivery.job_type.debounce
        assert debounce is not None
        if debounce.if_unavailable == "run":
            delivery.dedup_unavailable = True
            # An earlier delivery of it may have taken the window: if so, the jobs it
            # debounced count on its run, which a root recorded since must not skip.
            # Running a job that owned nothing costs a run, never a job.
            registered = bool(string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE))
            delivery.owes_run = delivery.owes_run or registered or delivery.receive_count > 1
            return None
        shown = debounce.key.shown(debounce.key.value(delivery.spec))
        return self._hold(delivery, None, f"debounce for {shown} not checked: the jobs table is unavailable")

    def _stale(self, deliveries: Sequence[Delivery]) -> set[Delivery]:
        """The deliveries whose root is already superseded (a root the table cannot
        tell about counts as not superseded: the job goes on, as it would fail open)."""
        rooted = [d for d in deliveries if d.spec.has_root_job_params()]
        if not rooted:
            return set()
        answers = self._parallel.map(self._is_superseded, rooted)
        return {delivery for delivery, stale in zip(rooted, answers, strict=True) if stale}

    def _is_superseded(self, delivery: Delivery) -> bool:
        try:
            return self._superseded(delivery.spec)
        except TableUnavailable as exc:
            log.warning("root not checked before debounce: %s", exc, extra=delivery.keys)
            return False

    @staticmethod
    def _skip_superseded(delivery: Delivery) -> RecordResult:
        log.info("job skipped (superseded): %s", SUPERSEDED_REASON, extra=delivery.keys)
        return delivery.result(Outcome.SUPERSEDED, reason=SUPERSEDED_REASON)

    def _step(self, step: _Step) -> RecordResult | None:
        delivery = step.delivery
        debounce = delivery.job_type.debounce
        assert debounce is not None
        spec, now = delivery.spec, self._clock.now()
        ref, at = job_ref(spec.domain, spec.id), _pushed_at(delivery, now)
        shown = debounce.key.shown(step.key)
        try:
            if step.registered:
                token = _registration(delivery)
            else:
                token = delivery.message_id
                if step.stale:  # superseded since: it runs only if an earlier delivery of it took the window
                    again = self._windows.registered_again(spec.type, spec.domain, step.key, token, now=now)
                    if again is None:
                        return self._skip_superseded(delivery)
                    registered: Registered | Debounced = again
                else:
                    ready = max(delivery.seen_at or at, spec.release_at or at)
                    registered = self._windows.register(
                        spec.type, spec.domain, step.key, ref, token, at, ready_at=ready, now=now
                    )
                if isinstance(registered, Debounced):
                    return self._debounced_by(delivery, registered)
                delivery.debounce_registration = token  # its copies carry it (a wait, a hold, a deferral)
                # never past the window's end: the latest when it comes is back by then, and runs
                wait_s = min(debounce.wait_s, registered.first_at + debounce.max_wait_s - now)
                if wait_s >= 1:
                    attributes = {DEBOUNCE_ATTRIBUTE: string_attribute(token)}
                    why = f"debounce: waiting {math.ceil(wait_s)} s for later jobs with {shown}"
                    return self._requeue(delivery, math.ceil(wait_s), Outcome.DELAYED, why, attributes)
            claimed = self._windows.claim(spec.type, spec.domain, step.key, ref, token, at, now=now)
        except TableUnavailable as exc:
            log.warning("debounce not checked: %s", exc, extra=delivery.keys)
            return self._unavailable(delivery)
        if isinstance(claimed, Debounced):
            return self._debounced_by(delivery, claimed)
        # the jobs it debounced, and will while it runs, are owed its run (and on its
        # retries: a new window opened since by a job ready later takes none of it)
        delivery.owes_run, delivery.debounce_registration = True, token
        return None

    def _debounced_by(self, delivery: Delivery, owner: Debounced) -> RecordResult | None:
        """Debounced by the window's owner, unless the owner was cancelled: a job
        nobody cancelled is not folded into a run that will not happen (it runs)."""
        delivery.note(self, owner)
        if self._owner_cancelled(delivery, owner):
            return None
        return self._debounced(delivery, owner.reason, same=owner.same_job)

    def _owner_cancelled(self, delivery: Delivery, owner: Debounced) -> bool:
        """Whether a cancellation covers the window's owner (a read of the type's
        mark, and of the owner's records only if it reaches back to the owner's push)."""
        found = owner.owner
        if self._cancellations is None or not delivery.job_type.cancellable or found is None or owner.same_job:
            return False
        domain, job_id = found
        # (its ordering time is no later than its stamp: a cancellation after its push may count, never miss)
        verdict = self._cancellations.of_job(Push(delivery.spec.type, domain, job_id, owner.latest_at))
        if verdict is None:
            return False
        # (unread: it runs, rather than be folded into a run that may not happen)
        why = "could not be checked" if verdict is UNREAD else "was cancelled"
        log.info("runs: the job that owns its debounce window (%s) %s", owner.by, why, extra=delivery.keys)
        return True

    @staticmethod
    def _debounced(delivery: Delivery, why: str, *, same: bool = False) -> RecordResult:
        """Skipped: a later job owns the run; ``same``: a later delivery of this very job (a
        push of it again), whose end is the job's (its batch and status wait for that one)."""
        log.info("job skipped (debounced): %s", why, extra=delivery.keys)
        return delivery.result(Outcome.DEBOUNCED, reason=why, other_copy_runs=same)


def _pushed_at(delivery: Delivery, now: float) -> float:
    """When the job was pushed, as debounce orders jobs (:attr:`Delivery.pushed_at`:
    capped at what SQS saw, so a producer's fast clock cannot put a job ahead
    of jobs pushed after it), and never later than now."""
    pushed = delivery.pushed_at if delivery.pushed_at is not None else delivery.spec.enqueued_at
    return now if pushed is None else min(pushed, now)


def _registration(delivery: Delivery) -> str | None:
    """The message that registered the job, which its copy names; ``None`` for a
    copy an older runner sent (it carried a time, or ``1``: the claim then
    names the job). A sender that sets the attribute gains nothing: its job
    runs unless a job pushed no earlier registered."""
    text = string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE) or ""
    try:
        float(text)
    except ValueError:
        return text or None
    return None


def _shown(delivery: Delivery) -> str:
    spec = delivery.spec
    return f"{spec.domain}/{spec.id}" if spec.domain is not None else spec.id
