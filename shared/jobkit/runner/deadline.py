"""Keeping a batch inside the function's timeout.

A runner runs a batch's jobs one after another. If the invocation reaches its
timeout, Lambda stops it: no batch response comes back, and the whole batch
returns to the queue, the jobs that succeeded included (they run again), the
jobs that never started with a receive spent, and after ``maxReceiveCount``
such receives SQS moves them all to the DLQ without a reason ("Handling errors
for an SQS event source in Lambda", AWS Lambda guide).

So before each job the runner asks whether the job fits in the time left: the
longest run of its type this container has seen (or of any type, for a type it
has not run yet), plus a reserve for settling the batch and reporting. A job
that does not fit is handed back: sent again at once as a new message that
carries the attempts it had used (a deferral, not an attempt), and the
invocation reports what ran. The first job of an invocation always runs,
whatever its estimate: a job that takes longer than the whole timeout times
out on its own attempts, and a batch always makes progress.
"""

from __future__ import annotations

from jobkit.runner.delivery import Delivery

#: Time kept back for settling the batch and answering Lambda: this share of
#: the timeout, at least :data:`MIN_RESERVE_S`.
RESERVE_SHARE = 0.05
MIN_RESERVE_S = 1.0


class TimeBudget:
    """The longest run of each type in this container, and whether the next job fits."""

    def __init__(self) -> None:
        self._longest: dict[str, float] = {}

    def ran(self, job_type: str, seconds: float) -> None:
        if seconds > self._longest.get(job_type, 0.0):
            self._longest[job_type] = seconds

    def needs_s(self, delivery: Delivery) -> float:
        """What the job needs, by what this container has seen, with the reserve."""
        seen = self._longest.get(delivery.spec.type)
        if seen is None:
            seen = max(self._longest.values(), default=0.0)
        return seen + max(MIN_RESERVE_S, RESERVE_SHARE * delivery.job_type.timeout_s)

    def fits(self, delivery: Delivery) -> tuple[bool, float, float]:
        """(whether the job fits in the invocation's time left, the time left, what it needs)."""
        if delivery.context is None:
            return True, float("inf"), 0.0
        left = delivery.remaining_s(delivery.job_type.timeout_s)
        needs = self.needs_s(delivery)
        return left >= needs, left, needs
