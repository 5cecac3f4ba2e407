"""The final-attempt record: when a job's last attempt starts, and again when
it succeeds, the runner writes a small record, so that a receive after the
last attempt can tell "it succeeded, only the delete was lost" from "it never
finished" (see :mod:`jobkit.runner.attempts`). Earlier attempts cost no request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jobkit.records import FinalAttempt as FinalAttemptRecord
from jobkit.runner.attempts import Attempts
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Run, Stage

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit


class FinalAttempt(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> FinalAttempt:
        return cls(parts.attempts)

    def __init__(self, attempts: Attempts) -> None:
        self._attempts = attempts

    def start(self, delivery: Delivery, run: Run) -> None:
        final = self._attempts.started(delivery, run.started_at)
        if final is not None:
            delivery.note(self, final)

    def finish(self, delivery: Delivery, run: Run) -> None:
        final: FinalAttemptRecord | None = delivery.noted(self)
        if final is not None and run.succeeded and run.finished_at is not None:
            self._attempts.succeeded(final, run.finished_at)
