"""One job, by hand: push it (``jobkit push``), or look it up (``jobkit job ID``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobkit.config import Declaration
from jobkit.errors import JobKitError, SpecError
from jobkit.ops.dead_letters import failure_to_json
from jobkit.push import JobQueueGroup
from jobkit.records import FailureRecord, RecordsBackend
from jobkit.spec import JobSpecification
from jobkit.status import JobStatus


@dataclass(frozen=True)
class JobReport:
    """What the jobs table knows of a job: its status (``track_status`` types)
    and its failure records, newest first (every type, 14 days)."""

    job_id: str
    status: JobStatus | None
    failures: list[FailureRecord]

    @property
    def found(self) -> bool:
        return self.status is not None or bool(self.failures)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "status": self.status.to_json() if self.status is not None else None,
            "failures": [failure_to_json(f) for f in self.failures],
        }


def job_report(
    records: RecordsBackend, declaration: Declaration, job_id: str, *, failure_limit: int = 100
) -> JobReport:
    """Look a job up by ID in every declared type: two queries per type.

    Raises:
        DedupUnavailable: the table could not be read.
    """
    status: JobStatus | None = None
    failures: list[FailureRecord] = []
    for job_type in declaration.types:
        statuses = records.statuses(job_type, job_id)
        if statuses and status is None:
            status = statuses[0]
        for runs in records.runs(job_type, job_id, failure_limit).values():
            failures.extend(runs.failures)
    failures.sort(key=lambda f: (f.at, f.attempt), reverse=True)
    return JobReport(job_id, status, failures)


def push_job(
    group: JobQueueGroup, job_type: str, params_json: str, *, domain: str | None = None, delay_s: float | None = None
) -> str:
    """Enqueue one job by hand through the push SDK. Returns its ID.

    Raises:
        UnknownJobType: the type is not declared.
        SpecError: the params are not a JSON object, or the spec is invalid.
        JobQueueError: SQS did not take it.
    """
    group.declaration.job_type(job_type)
    try:
        params = json.loads(params_json)
    except ValueError as exc:
        raise SpecError(f"--params must be a JSON object: {exc}") from exc
    if not isinstance(params, dict):
        raise SpecError(f"--params must be a JSON object, got {type(params).__name__}")
    if delay_s is not None and delay_s < 0:
        raise JobKitError(f"--delay must be a non-negative number of seconds, got {delay_s}")
    [job_id] = group.push(JobSpecification(job_type, params, domain=domain, delay=delay_s))
    return job_id
