"""``jobkit top --by domain``: which domains keep a type busy?

Per job type, its busiest domains over the last ``window_s`` seconds: jobs
that succeeded, per minute, and each domain's share of the type's. No
CloudWatch metric has a domain dimension (one metric per domain would be
billed monthly, a wiki farm has hundreds): the figures come from the
Contributor Insights rule of the type's queue (:mod:`jobkit.template.insight`),
which counts the runner's one line per succeeded job by type and domain.

- **On AWS**: ``GetInsightRuleReport`` on each queue's rule, one request per
  queue per frame (CloudWatch bills each; its figures are approximate).
- **On an emulator** (an endpoint on loopback, such as ``jobkit local up``, or
  one that raises ``NotImplementedError``, as moto does in-process): moto does not
  implement ``GetInsightRuleReport``, so the same rule is applied here to
  the runner's log lines in its log group (``FilterLogEvents``), which the
  local stack writes as a runner would (:mod:`jobkit.ops.insight_rules`).

A job without a domain writes no ``domain`` key, so it is no contributor; a
type's share is of the jobs with a domain. Types that share a queue share its
rule, whose total spans them all: their share is not shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from jobkit.declaration.config import Declaration
from jobkit.ops.insight_rules import MAX_CONTRIBUTORS, LogsClient, evaluated_report, rule_report

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

DEFAULT_LIMIT = 10
FROM_INSIGHTS = "Contributor Insights"
FROM_LOGS = "the runners' log events (no Contributor Insights here)"


@dataclass(frozen=True)
class DomainLine:
    """One domain of one type; ``share`` of the type's jobs, ``None`` where unknown."""

    job_type: str
    domain: str
    jobs: float
    per_min: float
    share: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.job_type,
            "domain": self.domain,
            "jobs": round(self.jobs, 2),
            "per_min": round(self.per_min, 2),
            "share": None if self.share is None else round(self.share, 4),
        }


@dataclass(frozen=True)
class DomainsReport:
    """One frame of ``jobkit top --by domain``: per type, its busiest domains first."""

    at: float
    window_s: int
    job_types: list[str]
    lines: list[DomainLine]
    source: str
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "window_s": self.window_s,
            "by": "domain",
            "source": self.source,
            "types": self.job_types,
            "domains": [line.to_json() for line in self.lines],
            "notes": self.notes,
        }


def busiest_domains(
    cloudwatch: CloudWatchClient,
    logs: LogsClient,
    declaration: Declaration,
    *,
    now: float,
    window_s: int,
    job_type: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> DomainsReport:
    """The ``limit`` busiest domains of ``job_type`` (else of each type) over the
    last ``window_s`` seconds. Never raises for a report it cannot get: a note says why."""
    if window_s < 60 or window_s % 60:
        raise ValueError(f"the window must be a whole number of minutes, got {window_s} s")
    from jobkit.template.insight import domains_rule_definition, domains_rule_name

    wanted = [job_type] if job_type is not None else sorted(declaration.types)
    start, minutes = now - window_s, window_s / 60
    emulated = on_loopback(cloudwatch.meta.endpoint_url)
    lines: list[DomainLine] = []
    notes: list[str] = []
    for queue in sorted({declaration.types[name].queue for name in wanted}):
        members = declaration.queues[queue].types
        # the rule ranks every type of the queue together: ask for enough to fill each type's list
        count = min(limit * len(members), MAX_CONTRIBUTORS)
        definition = domains_rule_definition(declaration.names.log_group(queue))
        try:
            if emulated:
                report = evaluated_report(logs, definition, start=start, end=now, max_contributors=count)
            else:
                try:
                    name = domains_rule_name(declaration.names, queue)
                    report = rule_report(cloudwatch, name, start=start, end=now, max_contributors=count)
                except NotImplementedError:  # an emulator in this process (moto): not AWS
                    emulated = True
                    report = evaluated_report(logs, definition, start=start, end=now, max_contributors=count)
        except Exception as exc:  # a view without figures is still useful; a crashed one is not
            notes.append(f"domains of queue {queue} unavailable: {_why(exc, declaration, queue)}")
            continue
        total = float(report.get("AggregateValue") or 0.0) if len(members) == 1 else None
        lines += _lines(report, [t for t in wanted if t in members], limit, minutes, total)
    if not lines and not notes:
        notes.append(f"no job with a domain succeeded in the last {window_s // 60} min")
    return DomainsReport(now, window_s, wanted, lines, FROM_LOGS if emulated else FROM_INSIGHTS, notes)


def on_loopback(endpoint_url: str) -> bool:
    """Whether an endpoint is on this machine (an emulator: AWS is never there)."""
    host = urlsplit(endpoint_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def _why(exc: Exception, declaration: Declaration, queue: str) -> str:
    from jobkit.template.insight import domains_rule_name

    code = getattr(exc, "response", {}).get("Error", {}).get("Code")
    if code == "ResourceNotFoundException":
        return f"no rule {domains_rule_name(declaration.names, queue)} (deploy the current template): {exc}"
    return f"{type(exc).__name__}: {exc}"


def _lines(
    report: dict[str, Any], job_types: list[str], limit: int, minutes: float, total: float | None
) -> list[DomainLine]:
    labels: list[str] = report.get("KeyLabels", [])
    type_at, domain_at = labels.index("$.job_type"), labels.index("$.domain")
    by_type: dict[str, list[DomainLine]] = {name: [] for name in job_types}
    for contributor in report.get("Contributors", []):
        keys = contributor["Keys"]
        found = by_type.get(keys[type_at])
        if found is None or len(found) >= limit:
            continue
        jobs = float(contributor["ApproximateAggregateValue"])
        share = jobs / total if total else None
        found.append(DomainLine(keys[type_at], keys[domain_at], jobs, jobs / minutes, share))
    return [line for name in job_types for line in by_type[name]]
