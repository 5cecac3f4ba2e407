"""jobkit: MediaWiki's job queue on SQS, Lambda and DynamoDB.

The public API::

    from jobkit import Job, JobQueueGroup, JobSpecification, NonRetryableError, queue_group

Importing jobkit is cheap: it does not import boto3 or create clients.
"""

from __future__ import annotations

from jobkit.errors import (
    ConfigError,
    FailedJob,
    JobClassError,
    JobFailed,
    JobKitError,
    JobQueueError,
    NonRetryableError,
    SpecError,
    UnknownJobType,
)
from jobkit.job import Job, JobContext
from jobkit.push import JobQueueGroup
from jobkit.spec import JobSpecification
from jobkit.wiring import queue_group

__version__ = "0.2.0"

__all__ = [
    "ConfigError",
    "FailedJob",
    "Job",
    "JobClassError",
    "JobContext",
    "JobFailed",
    "JobKitError",
    "JobQueueError",
    "JobQueueGroup",
    "JobSpecification",
    "NonRetryableError",
    "SpecError",
    "UnknownJobType",
    "queue_group",
]
