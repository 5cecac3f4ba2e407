"""A batch's check: a message a runner sends itself when it counted a batch's
last end but could not push the batch's callbacks (the jobs table or the
callback's queue was down), and no message of its own can go back for it (a
dead-lettered member's cannot). Its runner checks the batch again when it
arrives (:mod:`jobkit.runner.stages.batch`): the check pushes only what the
batch's counts call for, once, so a check sent twice, or by anyone, pushes
nothing more. A check that fails again is retried like a job, and dead-lettered
with its reason after the queue's attempts; redriven, it checks again.
"""

from __future__ import annotations

from dataclasses import replace

from jobkit.core.resources import BATCH_CHECK_TYPE
from jobkit.declaration.config import JobType, QueueConfig
from jobkit.declaration.type_options import Backoff
from jobkit.jobs.canary import canary_type
from jobkit.jobs.job import Job

__all__ = ["BATCH_CHECK_CLASS", "BATCH_CHECK_TYPE", "BATCH_PARAM", "BatchCheckJob", "check_type"]

BATCH_CHECK_CLASS = "jobkit.jobs.batch_check:BatchCheckJob"
#: The param that names the batch (its domain is the check's).
BATCH_PARAM = "batch"


class BatchCheckJob(Job):
    """Runs only when its runner could not check the batch: a failed attempt, retried."""

    def run(self) -> bool:
        raise RuntimeError(
            f"batch {self.params.get(BATCH_PARAM)!r} could not be checked (the jobs table, or its callback's"
            " queue, was unavailable): tried again"
        )


def check_type(queue: QueueConfig) -> JobType:
    """A batch's check as the runner of ``queue`` serves it: as the canary is
    (the queue's attempts and timeout, no flow control), untracked, and retried
    within a minute or two."""
    return replace(
        canary_type(queue),
        name=BATCH_CHECK_TYPE,
        class_path=BATCH_CHECK_CLASS,
        backoff=Backoff(base_s=30.0, factor=2.0, cap_s=300.0, jitter=0.2),
        track_status=False,
    )
