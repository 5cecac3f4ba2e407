"""Schedules: jobs pushed on a clock, declared beside their types in
``infra/jobs.toml`` and fired by EventBridge Scheduler straight into the
type's queue (no function in between).

::

    [schedules.nightlyDigest]
    type = "enotifNotify"
    cron = "0 3 * * ? *"                 # EventBridge's six fields; or rate = "1 hour"
    timezone = "Europe/Berlin"           # default UTC
    params = { digest = "daily" }
    domain = "enwiki"                    # optional
    flexible_window_min = 15             # optional: fire any time within 15 minutes

Each firing is one job whose ID comes from the scheduler's execution ID, so
no two firings share one (:func:`input_template`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobkit.core.cron import iso_utc
from jobkit.core.errors import ConfigError, SpecError
from jobkit.core.resources import refuse_shared_logical_ids
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import WIRE_VERSION, valid_domain


class ChecksJobs(Protocol):
    """What a schedule needs of its job type (a declared ``JobType``): the
    check push applies to every job it sends."""

    def check_job(self, spec: JobSpecification, now: float) -> None: ...


#: A schedule's name; with the prefix (at most 16) and "-", within the scheduler's 64 characters.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,47}$")
#: EventBridge's cron: minutes, hours, day of month, month, day of week, year.
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*?,/#LW-]+$")
_RATE = re.compile(r"^([1-9][0-9]{0,5}) (minute|minutes|hour|hours|day|days)$")

#: What the scheduler fills in, per firing (its context attributes).
EXECUTION_ID = "<aws.scheduler.execution-id>"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
#: The job ID of a firing: this prefix and the scheduler's execution ID.
JOB_ID_PREFIX = "sched-"
#: What every context attribute of the scheduler starts with: never in a schedule's own params or domain.
PLACEHOLDER = "<aws.scheduler."
#: An execution ID like the scheduler's, to build a firing's body when the declaration loads.
SAMPLE_EXECUTION_ID = "0123456789abcdef"
#: The most a schedule's body may be: EventBridge's payload limit (256 KB), far below SQS's.
MAX_INPUT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Schedule:
    """One declared schedule."""

    name: str
    type: str
    cron: str | None = None
    rate: str | None = None
    timezone: str = "UTC"
    params: Mapping[str, Any] = field(default_factory=dict)
    domain: str | None = None
    flexible_window_min: int | None = None

    @property
    def expression(self) -> str:
        """The scheduler's ScheduleExpression: ``cron(...)`` or ``rate(...)``."""
        return f"cron({self.cron})" if self.cron is not None else f"rate({self.rate})"


def _cron_problem(cron: str) -> str | None:
    """What is wrong with a cron expression's values (``99 3 * * ? *``), or None.
    ``L``, ``W`` and ``#`` are AWS's to evaluate: not a problem."""
    from jobkit.core.cron import Cron, CronNotSupported

    try:
        Cron.parse(cron)
    except CronNotSupported:
        return None
    except ValueError as exc:
        return str(exc)
    return None


def input_template(schedule: Schedule) -> str:
    """The message body the scheduler sends at each firing: a wire-format job
    spec whose ID and enqueue time the scheduler fills in (its execution ID, and
    the firing's scheduled time as an RFC 3339 UTC time)."""
    body: dict[str, Any] = {
        "v": WIRE_VERSION,
        "id": JOB_ID_PREFIX + EXECUTION_ID,
        "type": schedule.type,
        "params": dict(schedule.params),
        "enqueuedAt": SCHEDULED_TIME,
    }
    if schedule.domain is not None:
        body["domain"] = schedule.domain
    return json.dumps(body, separators=(",", ":"), sort_keys=True, allow_nan=False)


def fired_body(schedule: Schedule, execution_id: str, scheduled_time: str) -> str:
    """The body of one firing, as the scheduler makes it from :func:`input_template`."""
    return input_template(schedule).replace(EXECUTION_ID, execution_id).replace(SCHEDULED_TIME, scheduled_time)


# -- parsing ------------------------------------------------------------------------------------

_KEYS = {"type", "cron", "rate", "timezone", "params", "domain", "flexible_window_min"}


def parse_schedules(source: str, raw: Any, types: Mapping[str, ChecksJobs]) -> dict[str, Schedule]:
    """The ``[schedules.NAME]`` tables of a declaration, checked against its types."""
    if not isinstance(raw, Mapping):
        raise ConfigError(source, "schedules", f"must be a table of schedules, got {type(raw).__name__}")
    schedules = {name: _schedule(source, name, spec, types) for name, spec in raw.items()}
    refuse_shared_logical_ids(source, schedules, lambda name: f"schedules.{name}")
    return schedules


def _schedule(source: str, name: str, spec: Any, types: Mapping[str, ChecksJobs]) -> Schedule:
    key = f"schedules.{name}"
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(source, key, "a schedule name must match " + NAME_PATTERN.pattern)
    if not isinstance(spec, Mapping):
        raise ConfigError(source, key, f"must be a table, got {type(spec).__name__}")
    for option in spec:
        if option not in _KEYS:
            raise ConfigError(source, f"{key}.{option}", f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
    job_type = spec.get("type")
    if not isinstance(job_type, str) or job_type not in types:
        raise ConfigError(source, f"{key}.type", f"must name a declared job type, got {job_type!r}")
    cron, rate = spec.get("cron"), spec.get("rate")
    if (cron is None) == (rate is None):
        raise ConfigError(source, key, 'give exactly one of cron = "..." or rate = "..."')
    if cron is not None and not _valid_cron(cron):
        raise ConfigError(
            source,
            f"{key}.cron",
            f'must be EventBridge\'s six cron fields, like "0 3 * * ? *" (one of day of month and day of'
            f' week is "?"), got {cron!r}',
        )
    if cron is not None:
        problem = _cron_problem(cron)
        if problem is not None:
            raise ConfigError(source, f"{key}.cron", f"{cron!r}: {problem}")
    if rate is not None and not _valid_rate(rate):
        raise ConfigError(source, f"{key}.rate", f'must be like "5 minutes", "1 hour" or "2 days", got {rate!r}')
    timezone = spec.get("timezone", "UTC")
    if not _valid_timezone(timezone):
        raise ConfigError(
            source, f"{key}.timezone", f'must be an IANA time zone like "Europe/Berlin", got {timezone!r}'
        )
    params = spec.get("params", {})
    if not isinstance(params, Mapping):
        raise ConfigError(source, f"{key}.params", f"must be a table, got {type(params).__name__}")
    domain = spec.get("domain")
    if domain is not None and not (isinstance(domain, str) and valid_domain(domain)):
        raise ConfigError(source, f"{key}.domain", f"must be a non-empty string, got {domain!r}")
    window = spec.get("flexible_window_min")
    if window is not None and not (isinstance(window, int) and not isinstance(window, bool) and 1 <= window <= 1440):
        raise ConfigError(source, f"{key}.flexible_window_min", f"must be an integer from 1 to 1440, got {window!r}")
    for where, value in (("params", params), ("domain", domain)):
        if PLACEHOLDER in json.dumps(value, default=str):
            raise ConfigError(
                source,
                f"{key}.{where}",
                f"holds {PLACEHOLDER!r}, which the scheduler would replace with a value of its own at each firing",
            )
    schedule = Schedule(name, job_type, cron, rate, timezone, params, domain, window)
    now = time.time()  # the scheduler fires on the real clock
    try:  # the body it sends must be a job the runner takes, as the runner reads it
        body = fired_body(schedule, SAMPLE_EXECUTION_ID, iso_utc(now))
        spec = JobSpecification.from_message(body)
    except (TypeError, ValueError) as exc:  # a TOML date or time, inf or nan: not JSON
        raise ConfigError(source, f"{key}.params", f"must be JSON (no dates, times, inf or nan): {exc}") from None
    except SpecError as exc:
        raise ConfigError(source, f"{key}.params", str(exc)) from None
    try:  # and pass what push checks before it sends a job, which is what the runner refuses as poison
        types[job_type].check_job(spec, now)
    except SpecError as exc:  # InvalidParams too; the firing's made-up job ID would only confuse
        problem = str(exc).removeprefix(f"{spec.type} {spec.id}: ")
        raise ConfigError(
            source, f"{key}.params", f"every firing would be dead-lettered as poison: {problem}"
        ) from None
    size = len(body.encode("utf-8"))
    if size > MAX_INPUT_BYTES:
        raise ConfigError(
            source,
            f"{key}.params",
            f"make a message body of {size:,} bytes, over the {MAX_INPUT_BYTES:,} a schedule may send:"
            " keep large data elsewhere (S3) and put its key in params",
        )
    return schedule


def _valid_cron(cron: Any) -> bool:
    if not isinstance(cron, str):
        return False
    fields = cron.split()
    if len(fields) != 6 or not all(_CRON_FIELD.fullmatch(f) for f in fields):
        return False
    return (fields[2] == "?") != (fields[4] == "?")  # EventBridge: exactly one of the day fields is "?"


def _valid_rate(rate: Any) -> bool:
    match = _RATE.fullmatch(rate) if isinstance(rate, str) else None
    if match is None:
        return False
    return (match.group(1) == "1") == (not match.group(2).endswith("s"))  # "1 hour", "2 hours"


def _valid_timezone(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def schedules_to_dict(schedules: Mapping[str, Schedule]) -> dict[str, Any]:
    """The schedules in their TOML shape."""
    out: dict[str, Any] = {}
    for name, s in schedules.items():
        table: dict[str, Any] = {"type": s.type, "timezone": s.timezone, "params": dict(s.params)}
        table.update({"cron": s.cron} if s.cron is not None else {"rate": s.rate})
        if s.domain is not None:
            table["domain"] = s.domain
        if s.flexible_window_min is not None:
            table["flexible_window_min"] = s.flexible_window_min
        out[name] = table
    return out
