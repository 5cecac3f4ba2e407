"""A receive after the type's last attempt: that attempt never reported back.

What the jobs table says of it decides, so the DLQ never shows a reason that
is not true: it succeeded (only the delete was lost: a redelivery), it failed
or timed out (dead-lettered with that reason), or nothing is recorded (the
receives went to batches that died first: this receive is the last attempt).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobkit.core.errors import JobFailed
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.runner.attempts import Attempts
from jobkit.runner.delivery import Delivery
from jobkit.runner.failures import Failures
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class PastLastAttempt(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> PastLastAttempt:
        return cls(parts.attempts, parts.failures)

    def __init__(self, attempts: Attempts, failures: Failures) -> None:
        self._attempts = attempts
        self._failures = failures

    def admit(self, delivery: Delivery) -> RecordResult | None:
        limit = delivery.job_type.max_attempts
        if delivery.attempt <= limit:
            return None
        last = self._attempts.last(delivery)
        if last is None:
            log.warning(
                "receive %d: no final attempt is recorded for this message; making it now",
                delivery.receive_count,
                extra=delivery.keys,
            )
            delivery.attempt = limit
            return None
        if last.succeeded:
            log.info("its final attempt succeeded; only the delete was lost", extra=delivery.keys)
            return delivery.result(Outcome.REDELIVERED, reason="its final attempt succeeded")
        error = last.error or JobFailed(f"attempt {last.attempt} did not finish")
        delivery.attempt = last.attempt
        return self._failures.dead_letter(delivery, "attempts_exhausted", error, str(error), {})
