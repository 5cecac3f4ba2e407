"""One job, by hand: push it (``jobkit push``), or look it up (``jobkit job ID``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.core.correlation import valid_correlation_id
from jobkit.core.errors import JobKitError, SpecError
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration
from jobkit.ops.records_json import failure_to_json, final_to_json
from jobkit.push import JobQueueGroup
from jobkit.records import ANY_DOMAIN, DomainFilter, FailureRecord, FinalAttempt, JobRuns
from jobkit.status.tracker import JobStatus

if TYPE_CHECKING:
    from jobkit.records.store import Records


@dataclass(frozen=True)
class JobMatch:
    """What the jobs table knows of one job: a job ID within one type and
    domain (callers may reuse an ID in another). Its status (``track_status``
    types), its failure records, newest first, and its final attempt, if it
    got that far (14 days)."""

    job_id: str
    job_type: str
    domain: str | None
    status: JobStatus | None = None
    failures: tuple[FailureRecord, ...] = ()
    final: FinalAttempt | None = None

    @property
    def correlation_id(self) -> str | None:
        """The correlation ID of the request (or job) that pushed it, as its
        newest record holds it: the status, else the final attempt, else the
        newest failure. None if no record holds one (or there is none)."""
        newest = self.failures[0] if self.failures else None
        for record in (self.status, self.final, newest):
            if record is not None and record.correlation_id is not None:
                return valid_correlation_id(record.correlation_id)
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "type": self.job_type,
            "domain": self.domain,
            "correlation_id": self.correlation_id,
            "status": self.status.to_json() if self.status is not None else None,
            "failures": [failure_to_json(f) for f in self.failures],
            "final_attempt": final_to_json(self.final),
        }


@dataclass(frozen=True)
class JobReport:
    """Every job with an ID: one match per (type, domain) with records."""

    job_id: str
    matches: list[JobMatch]

    @property
    def found(self) -> bool:
        return bool(self.matches)

    @property
    def status(self) -> JobStatus | None:
        """The status of the only match (``None`` with several, or none)."""
        return self.matches[0].status if len(self.matches) == 1 else None

    @property
    def failures(self) -> tuple[FailureRecord, ...]:
        """The failure records of the only match (none with several)."""
        return self.matches[0].failures if len(self.matches) == 1 else ()

    def not_found(self, job_type: str | None, domain: DomainFilter) -> str:
        """What the error says when nothing was found, with the filters."""
        where = f" of type {job_type}" if job_type else ""
        if domain is not ANY_DOMAIN:
            where += f" in domain {domain}" if domain is not None else " without a domain"
        return (
            f"no records of job {self.job_id}{where}: its type does not track status and it never failed,"
            " or it is older than 14 days"
        )

    def to_json(self) -> dict[str, Any]:
        """Every match under ``matches``; one match is also spread at the top
        level, so ``.status`` and ``.failures`` read as they always did."""
        data: dict[str, Any] = {"job_id": self.job_id}
        if len(self.matches) == 1:
            data.update(self.matches[0].to_json())
        data["matches"] = [m.to_json() for m in self.matches]
        return data


def job_report(
    records: Records,
    declaration: Declaration,
    job_id: str,
    *,
    job_type: str | None = None,
    domain: DomainFilter = ANY_DOMAIN,
    failure_limit: int = 100,
) -> JobReport:
    """Look a job ID up: in one type, or in every declared type (two queries
    per type), in one domain (``None``: jobs without one) or in every domain.

    Raises:
        UnknownJobType: ``job_type`` is not declared.
        TableUnavailable: the table could not be read.
    """
    types = [declaration.job_type(job_type).name] if job_type is not None else sorted(declaration.types)
    matches: list[JobMatch] = []
    for name in types:
        found = _matches(records, name, job_id, failure_limit, domain)
        matches.extend(m for m in found if domain is ANY_DOMAIN or m.domain == domain)
    return JobReport(job_id, matches)


def _matches(records: Records, job_type: str, job_id: str, failure_limit: int, domain: DomainFilter) -> list[JobMatch]:
    statuses = {s.domain: s for s in records.statuses(job_type, job_id)}
    runs = records.runs(job_type, job_id, failure_limit, domain)
    domains = sorted({*statuses, *runs}, key=lambda d: (d is not None, d or ""))
    matches = []
    for domain in domains:
        job_runs = runs.get(domain, JobRuns())
        failures = tuple(sorted(job_runs.failures, key=lambda f: (f.at, f.attempt), reverse=True))
        matches.append(JobMatch(job_id, job_type, domain, statuses.get(domain), failures, job_runs.final))
    return matches


def push_job(
    group: JobQueueGroup,
    job_type: str,
    params_json: str,
    *,
    domain: str | None = None,
    delay_s: float | None = None,
    priority: str | None = None,
) -> str:
    """Enqueue one job by hand through the push SDK. Returns its ID.

    Raises:
        UnknownJobType: the type is not declared.
        SpecError: the params are not a JSON object, or the spec is invalid (a priority lane
            the type's queue lacks, say).
        JobQueueError: SQS did not take it.
    """
    group.declaration.job_type(job_type)
    try:
        params = json.loads(params_json)
    except ValueError as exc:
        raise SpecError(f"--params must be a JSON object: {exc}") from exc
    except RecursionError:
        raise SpecError("--params must be a JSON object: nested too deeply to parse") from None
    if not isinstance(params, dict):
        raise SpecError(f"--params must be a JSON object, got {type(params).__name__}")
    if delay_s is not None and delay_s < 0:
        raise JobKitError(f"--delay must be a non-negative number of seconds, got {delay_s}")
    [job_id] = group.push(JobSpecification(job_type, params, domain=domain, delay=delay_s, priority=priority))
    return job_id
