"""EventBridge cron and rate expressions, evaluated as the scheduler does, in a time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobkit.core.cron import Cron, CronNotSupported, iso_utc, next_firing


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def firings(cron: str, start: str, count: int, timezone: str = "UTC") -> list[str]:
    found, when = [], at(start)
    for _ in range(count):
        nxt = next_firing(cron, None, timezone, when, when)
        assert nxt is not None
        found.append(iso_utc(nxt))
        when = nxt
    return found


def test_every_quarter_hour_strictly_after_now() -> None:
    assert firings("*/15 * * * ? *", "2026-11-22T02:00:00", 3) == [
        "2026-11-22T02:15:00Z",
        "2026-11-22T02:30:00Z",
        "2026-11-22T02:45:00Z",
    ]


def test_weekdays_by_name_with_sunday_as_one() -> None:
    # 2026-11-22 is a Sunday
    assert firings("0 9 ? * MON-FRI *", "2026-11-20T10:00:00", 2) == ["2026-11-23T09:00:00Z", "2026-11-24T09:00:00Z"]
    assert firings("0 9 ? * 1 *", "2026-11-20T10:00:00", 1) == ["2026-11-22T09:00:00Z"]


def test_a_time_zone_and_its_daylight_saving_changes() -> None:
    # 03:00 in Berlin: 02:00Z in winter, 01:00Z in summer (the clocks went forward on 2027-03-28)
    assert firings("0 3 * * ? *", "2027-03-26T12:00:00", 3, "Europe/Berlin") == [
        "2027-03-27T02:00:00Z",
        "2027-03-28T01:00:00Z",
        "2027-03-29T01:00:00Z",
    ]
    # 02:30 does not exist in Berlin on 2027-03-28: that day has no firing
    assert firings("30 2 * * ? *", "2027-03-27T12:00:00", 2, "Europe/Berlin") == [
        "2027-03-29T00:30:00Z",
        "2027-03-30T00:30:00Z",
    ]


def test_days_of_the_month_months_and_years() -> None:
    assert firings("0 0 1 JAN,JUL ? 2027-2028", "2026-11-22T00:00:00", 3) == [
        "2027-01-01T00:00:00Z",
        "2027-07-01T00:00:00Z",
        "2028-01-01T00:00:00Z",
    ]
    assert next_firing("0 0 1 1 ? 2026", None, "UTC", at("2026-11-22T00:00:00"), 0) is None  # no more firings


def test_what_only_aws_evaluates_is_named() -> None:
    with pytest.raises(CronNotSupported, match="not evaluated locally"):
        Cron.parse("0 0 L * ? *")
    with pytest.raises(ValueError, match="six fields"):
        Cron.parse("0 0 * * *")
    with pytest.raises(ValueError, match="from 0 to 59"):
        Cron.parse("61 0 * * ? *")


def test_a_rate_counts_from_its_start() -> None:
    start = at("2026-11-22T00:00:00")
    assert next_firing(None, "1 hour", "UTC", start, start) == start + 3600
    assert next_firing(None, "5 minutes", "UTC", start + 301, start) == start + 600
    assert next_firing(None, "2 days", "UTC", start + 1, start) == start + 2 * 86400
