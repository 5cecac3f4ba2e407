"""Debounce: of the jobs with the same key pushed within the wait, the latest
runs and the earlier ones are acknowledged as ``debounced``
(:mod:`jobkit.flow.debounce`).

On its first delivery a job registers as its key's latest and is sent again
after the wait, as a delay hop (not an attempt), carrying the debounce
attribute. On its return it claims the run: it runs if it is still the
latest, or if the key has waited ``max_wait_s`` since its window opened;
otherwise it is debounced. Of a batch's jobs with one key, only the one
enqueued last registers; the others are debounced by it at once. When the
jobs table cannot be reached, the type's ``if_unavailable`` decides: ``run``
(the default: the job runs, undebounced) or ``defer``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from jobkit.clock import Clock
from jobkit.flow.debounce import Debounced, DebounceWindows, job_ref
from jobkit.outcome import Outcome, RecordResult
from jobkit.parallel import Parallel
from jobkit.records import DedupUnavailable
from jobkit.runner.delivery import Delivery, string_attribute_of
from jobkit.runner.hold import Hold
from jobkit.runner.keyed import Group
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Later, Stage
from jobkit.sqs import DEBOUNCE_ATTRIBUTE, string_attribute

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Step:
    delivery: Delivery
    key: str
    registered: bool  # it came back from its wait: it claims the run


class DebounceStage(Stage):
    def __init__(
        self, windows: DebounceWindows, clock: Clock, requeue: Requeue, hold: Hold, parallel: Parallel
    ) -> None:
        self._windows = windows
        self._clock = clock
        self._requeue = requeue
        self._hold = hold
        self._parallel = parallel

    def admit_batch(self, deliveries: Sequence[Delivery]) -> list[RecordResult | Later | None]:
        answers: list[RecordResult | Later | None] = [None] * len(deliveries)
        steps: list[tuple[list[int], _Step]] = []
        newcomers: dict[Group, list[int]] = {}
        for index, delivery in enumerate(deliveries):
            debounce = delivery.job_type.debounce
            if debounce is None:
                continue
            key = debounce.key.value(delivery.spec)
            if string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE):
                steps.append(([index], _Step(delivery, key, registered=True)))
            else:
                newcomers.setdefault((delivery.spec.type, key), []).append(index)
        for (_, key), indexes in newcomers.items():
            # the one enqueued last registers for all of them (the batch's order breaks ties)
            ordered = sorted(indexes, key=lambda i: (_enqueued_at(deliveries[i], self._clock), i))
            steps.append((ordered, _Step(deliveries[ordered[-1]], key, registered=False)))
        done = self._parallel.map(self._step, [step for _, step in steps])
        for (indexes, step), answer in zip(steps, done, strict=True):
            owner = indexes[-1]
            answers[owner] = answer
            # the owner registered (it waits, or runs now): the earlier ones are debounced by it
            registered = not step.delivery.dedup_unavailable and (
                answer is None or (isinstance(answer, RecordResult) and answer.outcome is Outcome.DELAYED)
            )
            for index in indexes[:-1]:
                earlier = deliveries[index]
                if isinstance(answer, RecordResult) and answer.outcome is Outcome.DEBOUNCED and answer.reason:
                    answers[index] = self._debounced(earlier, answer.reason)
                elif (
                    registered
                    and earlier.spec.id == step.delivery.spec.id
                    and (earlier.spec.domain == step.delivery.spec.domain)
                ):
                    answers[index] = self._debounced(earlier, "another delivery of this job owns the run")
                elif registered:
                    answers[index] = self._debounced(earlier, f"job {_shown(step.delivery)} was pushed later")
                else:  # the owner could not register: each goes its own way
                    answers[index] = self._step(_Step(earlier, step.key, registered=False))
        return answers

    def admit(self, delivery: Delivery) -> RecordResult | None:
        debounce = delivery.job_type.debounce
        if debounce is None:
            return None
        registered = bool(string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE))
        return self._step(_Step(delivery, debounce.key.value(delivery.spec), registered))

    def _step(self, step: _Step) -> RecordResult | None:
        delivery = step.delivery
        debounce = delivery.job_type.debounce
        assert debounce is not None
        spec, now = delivery.spec, self._clock.now()
        ref = job_ref(spec.domain, spec.id)
        shown = debounce.key.shown(step.key)
        try:
            if not step.registered:
                at = _debounce_time(delivery, now)
                registered = self._windows.register(spec.type, step.key, ref, at, now=now)
                if isinstance(registered, Debounced):
                    return self._debounced(delivery, f"job {registered.by} was pushed later")
                # never past the window's end: the latest when it comes is back by then, and runs
                wait_s = min(debounce.wait_s, registered.first_at + debounce.max_wait_s - now)
                if wait_s >= 1:
                    attributes = {DEBOUNCE_ATTRIBUTE: string_attribute(repr(at))}
                    why = f"debounce: waiting {math.ceil(wait_s)} s for later jobs with {shown}"
                    return self._requeue(delivery, math.ceil(wait_s), Outcome.DELAYED, why, attributes)
            else:
                at = _registered_at(delivery, now)
            claimed = self._windows.claim(spec.type, step.key, ref, at, now=now)
        except DedupUnavailable as exc:
            log.warning("debounce not checked: %s", exc, extra=delivery.keys)
            if debounce.if_unavailable == "run":
                delivery.dedup_unavailable = True
                return None
            return self._hold(delivery, None, f"debounce for {shown} not checked: the jobs table is unavailable")
        if isinstance(claimed, Debounced):
            return self._debounced(delivery, f"job {claimed.by} was pushed later")
        return None

    @staticmethod
    def _debounced(delivery: Delivery, why: str) -> RecordResult:
        log.info("job skipped (debounced): %s", why, extra=delivery.keys)
        return delivery.result(Outcome.DEBOUNCED, reason=why)


def _enqueued_at(delivery: Delivery, clock: Clock) -> float:
    return _debounce_time(delivery, clock.now())


def _debounce_time(delivery: Delivery, now: float) -> float:
    """When the job was pushed, as debounce orders jobs: its enqueue time, but
    never later than now (a producer's clock may run up to the skew allowed
    ahead, and a job from the future would debounce every job pushed before it
    truly was)."""
    enqueued = delivery.spec.enqueued_at
    return now if enqueued is None else min(enqueued, now)


def _registered_at(delivery: Delivery, now: float) -> float:
    """The time the job registered with, which its copy carries; a value that
    does not read, or lies ahead, counts as now (a sender that sets the
    attribute gains nothing: its job runs unless a later one registered)."""
    text = string_attribute_of(delivery.record, DEBOUNCE_ATTRIBUTE)
    try:
        at = float(text or "")
    except ValueError:
        return _debounce_time(delivery, now)
    return at if math.isfinite(at) and at <= now else _debounce_time(delivery, now)


def _shown(delivery: Delivery) -> str:
    spec = delivery.spec
    return f"{spec.domain}/{spec.id}" if spec.domain is not None else spec.id
