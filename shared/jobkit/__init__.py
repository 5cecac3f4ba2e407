"""jobkit: MediaWiki's job queue on SQS, Lambda and DynamoDB.

The public API::

    from jobkit import Job, JobQueueGroup, JobSpecification, NonRetryableError, queue_group

Importing jobkit is cheap: it does not import boto3 or create clients, and
the push SDK (``JobQueueGroup``, ``queue_group``) is imported when first named,
so a runner whose jobs push nothing never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobkit.core.errors import (
    ConfigError,
    FailedJob,
    JobCancelled,
    JobClassError,
    JobFailed,
    JobKitError,
    JobQueueError,
    JobWaitTimeout,
    NonRetryableError,
    NotCancellable,
    SpecError,
    UnknownJobType,
)
from jobkit.core.spec import JobSpecification
from jobkit.jobs.job import Job, JobContext

from jobkit.core import moved as _moved  # isort: skip  (old module paths, for one release)

_moved.install()

if TYPE_CHECKING:
    from jobkit.core.correlation import correlation_scope, current_correlation_id
    from jobkit.push import JobQueueGroup
    from jobkit.wiring import queue_group

#: Named here, imported on first use.
_LAZY = {
    "JobQueueGroup": "jobkit.push",
    "queue_group": "jobkit.wiring",
    "correlation_scope": "jobkit.core.correlation",
    "current_correlation_id": "jobkit.core.correlation",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        if f"jobkit.{name}" in _moved.MOVED:  # jobkit.errors.X: a moved module, by its old path
            import importlib

            return importlib.import_module(f"jobkit.{name}")
        raise AttributeError(f"module 'jobkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__version__ = "0.2.0"

__all__ = [
    "ConfigError",
    "FailedJob",
    "Job",
    "JobCancelled",
    "JobClassError",
    "JobContext",
    "JobFailed",
    "JobKitError",
    "JobQueueError",
    "JobQueueGroup",
    "JobSpecification",
    "JobWaitTimeout",
    "NonRetryableError",
    "NotCancellable",
    "SpecError",
    "UnknownJobType",
    "correlation_scope",
    "current_correlation_id",
    "queue_group",
]
