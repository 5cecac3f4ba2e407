"""A Contributor Insights rule's report, from CloudWatch or worked out here.

On AWS, ``GetInsightRuleReport`` answers with a rule's top contributors over a
time range. moto (the local stack) keeps rules but does not implement that
call, so where it is missing the report is worked out the way CloudWatch does
it: the rule's definition applied to the log events of its log groups
(``FilterLogEvents``), answered in the shape of ``GetInsightRuleReport``'s
response. Only what jobkit's rules use is supported (JSON logs, keys and
filters on top-level or nested fields, ``IsPresent`` and ``In`` filters,
``Count`` or ``Sum``); anything else is an error rather than a wrong answer.

A log event that lacks one of the rule's keys is not counted: a contributor
is a value for every key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

#: A CloudWatch Logs client (typed loosely: the project's type stubs do not cover the service).
LogsClient = Any

#: GetInsightRuleReport's largest MaxContributorCount.
MAX_CONTRIBUTORS = 100
#: The period of the report's datapoints (jobkit reads only the totals).
REPORT_PERIOD_S = 60

_MISSING = object()


def rule_report(
    cloudwatch: CloudWatchClient, rule_name: str, *, start: float, end: float, max_contributors: int
) -> dict[str, Any]:
    """``GetInsightRuleReport`` for ``[start, end]``, contributors ranked by their sum."""
    response = cloudwatch.get_insight_rule_report(
        RuleName=rule_name,
        StartTime=datetime.fromtimestamp(start, UTC),
        EndTime=datetime.fromtimestamp(end, UTC),
        Period=REPORT_PERIOD_S,
        MaxContributorCount=min(max_contributors, MAX_CONTRIBUTORS),
        OrderBy="Sum",
    )
    return dict(response)


def evaluated_report(
    logs: LogsClient, definition: dict[str, Any], *, start: float, end: float, max_contributors: int
) -> dict[str, Any]:
    """The report ``GetInsightRuleReport`` would give for ``definition``, worked out
    from the log events of its log groups between ``start`` and ``end``."""
    messages = (m for group in definition["LogGroupNames"] for m in _messages(logs, group, start, end))
    return evaluate(definition, messages, max_contributors=max_contributors)


def evaluate(definition: dict[str, Any], messages: Iterable[str], *, max_contributors: int) -> dict[str, Any]:
    """Apply a rule to log messages: its contributors ranked by value (then by
    keys), the top ``max_contributors`` of them, and the total of all."""
    if definition.get("LogFormat") != "JSON":
        raise ValueError(f"only JSON log rules can be evaluated here, not {definition.get('LogFormat')!r}")
    contribution = definition["Contribution"]
    keys: list[str] = contribution["Keys"]
    filters = contribution.get("Filters", [])
    aggregate = definition["AggregateOn"]
    if aggregate not in ("Count", "Sum"):
        raise ValueError(f"unsupported AggregateOn {aggregate!r}")
    values: dict[tuple[str, ...], float] = {}
    for message in messages:
        event = _json(message)
        if event is None or not all(_passes(event, f) for f in filters):
            continue
        found = [_field(event, key) for key in keys]
        if any(value is _MISSING for value in found):
            continue
        amount = 1.0 if aggregate == "Count" else _number(_field(event, contribution["ValueOf"]))
        contributor = tuple(_text(value) for value in found)
        values[contributor] = values.get(contributor, 0.0) + amount
    ranked = sorted(values.items(), key=lambda item: (-item[1], item[0]))
    return {
        "KeyLabels": keys,
        "AggregationStatistic": aggregate,
        "AggregateValue": float(sum(values.values())),
        "ApproximateUniqueCount": len(values),
        "Contributors": [
            {"Keys": list(contributor), "ApproximateAggregateValue": float(value), "Datapoints": []}
            for contributor, value in ranked[: min(max_contributors, MAX_CONTRIBUTORS)]
        ],
    }


def _messages(logs: LogsClient, group: str, start: float, end: float) -> Iterator[str]:
    pages = logs.get_paginator("filter_log_events").paginate(
        logGroupName=group, startTime=int(start * 1000), endTime=int(end * 1000)
    )
    try:
        for page in pages:
            for event in page.get("events", []):
                yield event.get("message", "")
    except logs.exceptions.ResourceNotFoundException:
        return  # no log group yet: no runner of it has written a line


def _passes(event: dict[str, Any], rule_filter: dict[str, Any]) -> bool:
    value = _field(event, rule_filter["Match"])
    if "IsPresent" in rule_filter:
        return (value is not _MISSING) == bool(rule_filter["IsPresent"])
    if "In" in rule_filter:
        return value is not _MISSING and _text(value) in {_text(v) for v in rule_filter["In"]}
    raise ValueError(f"unsupported filter {sorted(set(rule_filter) - {'Match'})}")


def _field(event: dict[str, Any], path: str) -> Any:
    if not path.startswith("$."):
        raise ValueError(f"unsupported field {path!r}")
    value: Any = event
    for part in path[2:].split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _json(message: str) -> dict[str, Any] | None:
    try:
        event = json.loads(message)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
