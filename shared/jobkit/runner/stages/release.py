"""The delay hop: a job whose release time is still ahead goes back to the
queue with a new delay (at most SQS's 15 minutes), as the same body. A hop is
not an attempt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.jobs.canary import CANARY_TYPE, hop_cap
from jobkit.runner.delivery import Delivery
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Stage
from jobkit.sqs import MAX_DELAY_S, delay_seconds

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit


class DelayHop(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> DelayHop:
        return cls(kit.clock, parts.requeue)

    def __init__(self, clock: Clock, requeue: Requeue) -> None:
        self._clock = clock
        self._requeue = requeue

    def admit(self, delivery: Delivery) -> RecordResult | None:
        release = delivery.spec.release_at
        now = self._clock.now()
        if release is None or release <= now:
            return None
        # (a canary of `jobkit verify` may ask for shorter hops, to prove the path quickly)
        cap = hop_cap(delivery.spec.params) if delivery.spec.type == CANARY_TYPE else MAX_DELAY_S
        delay = delay_seconds(release - now, minimum=1, maximum=cap)
        delivery.attempt = delivery.prior_attempts + 1
        return self._requeue(delivery, delay, Outcome.DELAYED, "not released yet")
