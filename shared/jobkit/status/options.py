"""The job-status key of a job type (see :mod:`jobkit.status.tracker`)."""

from __future__ import annotations

from jobkit.declaration.options import flag

STATUS_OPTIONS = (
    flag(
        "track_status",
        "record each job's status in the jobs table for `jobkit job ID`: running, succeeded, failed or"
        " skipped, times, attempt, error, and the progress and result the job reports; costs 2 DynamoDB"
        " writes per attempt, plus at most one progress write per 5 s of run time (0 when false)",
    ),
)
