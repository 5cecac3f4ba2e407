"""The canary: a job type every runner knows without a declaration, which
``jobkit verify`` pushes through a deployed stack to prove it.

A canary runs no user code: it succeeds, or, asked to, fails for good (to
prove the DLQ path). Every runner serves it on its own queue, with the
queue's attempts and timeout, and records its status (``track_status``), so
``jobkit verify`` reads back each canary's fate from the jobs table. Its
results are counted under its own type, ``jobkitCanary``, never under a
declared type, so dashboards and ``jobkit top`` keep it out of a user's work.

A canary may ask for short delay hops (``hopS``, at most 900 s), so that a
chain of hops through the runner, the path a long delay takes, is proven in
seconds rather than in hours: the hop is the same re-send, only with a
shorter ``DelaySeconds``.
"""

from __future__ import annotations

from typing import Any

from jobkit.core.errors import NonRetryableError
from jobkit.core.resources import CANARY_TYPE
from jobkit.declaration.config import JobType, QueueConfig
from jobkit.declaration.type_options import Backoff
from jobkit.jobs.job import Job

__all__ = [
    "CANARY_CLASS",
    "CANARY_TYPE",
    "EXPIRES_PARAM",
    "FAILURE_TEXT",
    "HOP_PARAM",
    "CanaryJob",
    "canary_type",
    "expired",
    "hop_cap",
]

CANARY_CLASS = "jobkit.jobs.canary:CanaryJob"
#: The param that asks for shorter delay hops, in seconds.
HOP_PARAM = "hopS"
#: The param after which (epoch seconds) a canary is dropped unrun, leaving no record.
EXPIRES_PARAM = "expiresAt"
#: What a canary that fails for good says (the DLQ shows it).
FAILURE_TEXT = "jobkit verify: a canary that fails on purpose, to prove the path to the DLQ"


class CanaryJob(Job):
    """Succeeds, or with ``params["fail"]`` fails for good."""

    def run(self) -> bool:
        if self.params.get("fail"):
            raise NonRetryableError(FAILURE_TEXT)
        return True


def canary_type(queue: QueueConfig) -> JobType:
    """The canary as the runner of ``queue`` serves it: the queue's attempts and
    timeout, its status recorded, no flow control, quick retries."""
    return JobType(
        name=CANARY_TYPE,
        class_path=CANARY_CLASS,
        queue=queue.name,
        max_attempts=queue.max_receive_count,
        timeout_s=queue.timeout_s,
        memory_mb=queue.memory_mb,
        batch_size=queue.batch_size,
        max_concurrency=queue.max_concurrency,
        backoff=Backoff(base_s=1.0, factor=1.0, cap_s=1.0, jitter=0.0),
        track_status=True,
        fairness=None,
    )


def hop_cap(params: Any) -> int:
    """The longest delay hop a canary asked for (SQS's 900 s unless it asked for less)."""
    value = params.get(HOP_PARAM) if isinstance(params, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 900:
        return value
    return 900


def expired(params: Any, now: float) -> bool:
    """Whether a canary's time is up (``jobkit verify`` gave up on it): it is dropped unrun."""
    value = params.get(EXPIRES_PARAM) if isinstance(params, dict) else None
    return isinstance(value, int | float) and not isinstance(value, bool) and now > value
