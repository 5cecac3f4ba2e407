"""The keys of what an app may know and do of one job after it pushed it: its
status (:mod:`jobkit.status.tracker`) and its cancellation (:mod:`jobkit.status.cancel`)."""

from __future__ import annotations

from jobkit.declaration.options import flag

STATUS_OPTIONS = (
    flag(
        "track_status",
        "record each job's status in the jobs table for `jobkit job ID`: running, succeeded, failed or"
        " skipped, times, attempt, error, and the progress and result the job reports; costs 2 DynamoDB"
        " writes per attempt, plus at most one progress write per 5 s of run time (0 when false)",
    ),
    flag(
        "cancellable",
        "let apps and operators cancel its jobs (`group.cancel`, `group.cancel_all`, `jobkit cancel`): a"
        " cancelled job that has not started is acknowledged without running (outcome `cancelled`), and a"
        " running one can check `self.cancelled()`; costs one DynamoDB read per batch that holds its jobs"
        " (0 when false)",
    ),
)
