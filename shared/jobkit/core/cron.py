"""When a schedule fires next: EventBridge Scheduler's cron and rate
expressions, evaluated in the schedule's time zone. For the local stack's
scheduler and ``jobkit schedules``.

A cron expression has six fields, ``minutes hours day-of-month month
day-of-week year``, each ``*``, a value, a range ``a-b``, a step ``*/n`` or
``a-b/n``, or a list of these; months may be ``JAN``-``DEC`` and days of the
week ``SUN``-``SAT`` (1 is Sunday); one of the two day fields is ``?``.
EventBridge's ``L``, ``W`` and ``#`` are valid on AWS but not evaluated here:
:class:`CronNotSupported` says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

_MONTHS = {
    m: n for n, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)
}
_DAYS = {d: n for n, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], 1)}
_RATE = re.compile(r"^([0-9]+) (minute|minutes|hour|hours|day|days)$")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}
#: How far ahead a cron expression is searched for its next firing.
HORIZON_DAYS = 366 * 5


class CronNotSupported(ValueError):
    """A valid EventBridge expression this evaluator cannot evaluate (``L``, ``W``, ``#``)."""


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int] | None  # None: "?"
    months: frozenset[int]
    weekdays: frozenset[int] | None  # 1 = Sunday; None: "?"
    years: frozenset[int]
    zone: ZoneInfo

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> Cron:
        fields = expression.split()
        if len(fields) != 6:
            raise ValueError(f"a cron expression has six fields, got {expression!r}")
        minutes, hours, days, months, weekdays, years = fields
        weekday_marks = re.sub("|".join(_DAYS), "", weekdays.upper())  # SUN ... SAT hold no mark, but WED a W
        if any(mark in days.upper() for mark in "LW#") or any(mark in weekday_marks for mark in "LW#"):
            raise CronNotSupported(f"{expression!r}: L, W and # are not evaluated locally (AWS evaluates them)")
        return cls(
            _values(minutes, 0, 59),
            _values(hours, 0, 23),
            None if days == "?" else _values(days, 1, 31),
            _values(months, 1, 12, _MONTHS),
            None if weekdays == "?" else _values(weekdays, 1, 7, _DAYS),
            _values(years, 1970, 2199),
            ZoneInfo(timezone),
        )

    def after(self, when: float) -> float | None:
        """The first firing strictly after ``when`` (epoch seconds), or None within the horizon."""
        start = datetime.fromtimestamp(when, self.zone)
        for day in _days_from(start.date(), HORIZON_DAYS):
            if day.year not in self.years or day.month not in self.months:
                continue
            if self.days is not None and day.day not in self.days:
                continue
            weekday = day.isoweekday() % 7 + 1  # Sunday is 1
            if self.weekdays is not None and weekday not in self.weekdays:
                continue
            for hour in sorted(self.hours):
                for minute in sorted(self.minutes):
                    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=self.zone)
                    if local.astimezone(UTC).astimezone(self.zone).replace(tzinfo=None) != local.replace(tzinfo=None):
                        continue  # a time the clocks skip (a DST gap)
                    at = local.timestamp()
                    if at > when:
                        return at
        return None


def next_firing(cron: str | None, rate: str | None, timezone: str, after: float, started: float) -> float | None:
    """A schedule's first firing strictly after ``after``: a cron's in its time
    zone, or a rate's, counted from ``started`` (as a rate schedule counts from
    its creation)."""
    if cron is not None:
        return Cron.parse(cron, timezone).after(after)
    assert rate is not None
    match = _RATE.fullmatch(rate)
    if match is None:
        raise ValueError(f"not a rate: {rate!r}")
    period = int(match.group(1)) * _UNIT_S[match.group(2).rstrip("s")]
    periods = int((after - started) // period) + 1
    return started + periods * period


def iso_utc(at: float) -> str:
    """Epoch seconds as the scheduler writes a scheduled time: ``2026-11-22T02:00:00Z``."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _values(field: str, low: int, high: int, names: dict[str, int] | None = None) -> frozenset[int]:
    values: set[int] = set()
    for part in field.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            first, last = low, high
        elif "-" in base:
            a, b = base.split("-", 1)
            first, last = _value(a, names), _value(b, names)
        else:
            first = _value(base, names)
            last = high if step_text else first
        if not (low <= first <= high and low <= last <= high) or step < 1:
            raise ValueError(f"{field!r}: values must be from {low} to {high}")
        if first > last:
            raise ValueError(f"{field!r}: a range goes from the lower value to the higher ({base})")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def _value(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a value")
    return int(text)


def _days_from(first: object, count: int) -> Iterator[datetime]:
    day = datetime(first.year, first.month, first.day)  # type: ignore[attr-defined]
    for _ in range(count):
        yield day
        day += timedelta(days=1)
