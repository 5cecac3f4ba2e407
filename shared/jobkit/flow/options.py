"""The flow-control options of a job type, as ``infra/jobs.toml`` declares them.

::

    [types.sendEmail]
    fairness = "domain"                                    # the default; false turns it off
    concurrency = { key = "params.mailbox", limit = 2 }
    rate_limit = { key = "domain", per_second = 5, burst = 10 }
    debounce = { key = "params.page", wait_s = 30, max_wait_s = 300 }

A key is ``"type"`` (one for the whole type), ``"domain"``, or
``"params.NAME"`` (a top-level param).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from jobkit.core.errors import ConfigError
from jobkit.declaration.options import TypeOption, Where, int_in, no_unknown_keys, num_in

if TYPE_CHECKING:
    from jobkit.core.spec import JobSpecification

#: What a limit does when the jobs table cannot be reached: run the job anyway
#: (fail-open) or defer it (fail-closed).
IfUnavailable = Literal["run", "defer"]
IF_UNAVAILABLE = ("run", "defer")

_PARAM_KEY = re.compile(r"^params\.([A-Za-z0-9_-]{1,100})$")

#: A key value longer than this is stored as its SHA-1 (a DynamoDB key holds at most 1 KiB of sort key).
MAX_KEY_CHARS = 200

#: The key value of a job that has no domain, or lacks the keyed param.
NO_VALUE = "-"


@dataclass(frozen=True, slots=True)
class FlowKey:
    """What a limit counts by: the whole type, the job's domain, or one of its params."""

    source: Literal["type", "domain", "params"]
    param: str | None = None

    @classmethod
    def parse(cls, text: str) -> FlowKey:
        if text in ("type", "domain"):
            return cls(text)  # type: ignore[arg-type]
        match = _PARAM_KEY.fullmatch(text)
        if match is None:
            raise ValueError(text)
        return cls("params", match.group(1))

    def __str__(self) -> str:
        return f"params.{self.param}" if self.source == "params" else self.source

    def value(self, spec: JobSpecification) -> str:
        """The key's value for one job, as text: ``"*"`` for the type, ``"-"``
        when the job has no domain or lacks the param, ``"=VALUE"`` otherwise.
        A value over :data:`MAX_KEY_CHARS` is replaced by ``"#"`` and its SHA-1."""
        if self.source == "type":
            return "*"
        if self.source == "domain":
            found: Any = spec.domain
        else:
            found = spec.params.get(self.param, None) if self.param is not None else None
        if found is None:
            return NO_VALUE
        text = "=" + (found if isinstance(found, str) else json.dumps(found, sort_keys=True, separators=(",", ":")))
        if len(text) > MAX_KEY_CHARS:
            return "#" + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
        return text

    def shown(self, value: str) -> str:
        """A key value as the ops tools and logs show it: ``domain=enwiki``."""
        return f"{self}{value}" if value.startswith("=") else f"{self}:{value}"


DOMAIN_KEY = FlowKey("domain")


@dataclass(frozen=True, slots=True)
class ConcurrencyLimit:
    """At most ``limit`` jobs with the same key run at once, across all containers."""

    key: FlowKey
    limit: int
    if_unavailable: IfUnavailable = "defer"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``per_second`` jobs a second with the same key start, and at most
    ``burst`` at once after a quiet spell (a token bucket)."""

    key: FlowKey
    per_second: float
    burst: int
    if_unavailable: IfUnavailable = "defer"


@dataclass(frozen=True, slots=True)
class Debounce:
    """Of the jobs with the same key pushed less than ``wait_s`` apart, the
    latest runs; a steady stream still runs one at least every ``max_wait_s``."""

    key: FlowKey
    wait_s: int
    max_wait_s: int
    if_unavailable: IfUnavailable = "run"


# -- parsing ----------------------------------------------------------------------------------


def parse_fairness(source: str, key: str, raw: Any) -> FlowKey | None:
    if raw is False:
        return None
    return _key(source, key, raw, allow_false=True)


def parse_concurrency(source: str, key: str, raw: Any) -> ConcurrencyLimit | None:
    table = _options(source, key, raw, {"key", "limit", "if_unavailable"}, required={"limit"})
    if table is None:
        return None
    return ConcurrencyLimit(
        key=_key(source, f"{key}.key", table.get("key", "domain")),
        limit=_get(source, key, table, "limit", None, int_in(1, 10000), "must be an integer from 1 to 10000"),
        if_unavailable=_if_unavailable(source, key, table, "defer"),
    )


def parse_rate_limit(source: str, key: str, raw: Any) -> RateLimit | None:
    table = _options(source, key, raw, {"key", "per_second", "burst", "if_unavailable"}, required={"per_second"})
    if table is None:
        return None
    per_second = _get(
        source, key, table, "per_second", None, num_in(0.001, 100000), "must be a number from 0.001 to 100000"
    )
    default_burst = max(1, round(per_second))
    return RateLimit(
        key=_key(source, f"{key}.key", table.get("key", "domain")),
        per_second=float(per_second),
        burst=_get(
            source, key, table, "burst", default_burst, int_in(1, 100000), "must be an integer from 1 to 100000"
        ),
        if_unavailable=_if_unavailable(source, key, table, "defer"),
    )


def parse_debounce(source: str, key: str, raw: Any) -> Debounce | None:
    table = _options(source, key, raw, {"key", "wait_s", "max_wait_s", "if_unavailable"}, required={"wait_s"})
    if table is None:
        return None
    wait_s = _get(
        source, key, table, "wait_s", None, int_in(1, 900), "must be an integer from 1 to 900 (SQS's longest delay)"
    )
    max_wait_s = _get(
        source, key, table, "max_wait_s", 10 * wait_s, int_in(1, 86400), "must be an integer from 1 to 86400"
    )
    if max_wait_s < wait_s:
        raise ConfigError(source, f"{key}.max_wait_s", f"must be at least wait_s ({wait_s}), got {max_wait_s}")
    return Debounce(
        key=_key(source, f"{key}.key", table.get("key", "domain")),
        wait_s=wait_s,
        max_wait_s=max_wait_s,
        if_unavailable=_if_unavailable(source, key, table, "run"),
    )


def _options(source: str, key: str, raw: Any, allowed: set[str], *, required: set[str]) -> Mapping[str, Any] | None:
    if raw is None or raw is False:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(source, key, f"must be a table like {{ {', '.join(sorted(required))} = ... }}, got {raw!r}")
    no_unknown_keys(Where(source, key), raw, allowed)
    for name in sorted(required):
        if name not in raw:
            raise ConfigError(source, f"{key}.{name}", "is required")
    return raw


def _key(source: str, key: str, raw: Any, *, allow_false: bool = False) -> FlowKey:
    expected = '"type", "domain" or "params.NAME"' + (", or false" if allow_false else "")
    if not isinstance(raw, str):
        raise ConfigError(source, key, f"must be {expected}, got {raw!r}")
    try:
        return FlowKey.parse(raw)
    except ValueError:
        raise ConfigError(source, key, f"must be {expected}, got {raw!r}") from None


def _if_unavailable(source: str, key: str, table: Mapping[str, Any], default: IfUnavailable) -> IfUnavailable:
    value = table.get("if_unavailable", default)
    if value not in IF_UNAVAILABLE:
        raise ConfigError(source, f"{key}.if_unavailable", f'must be "run" or "defer", got {value!r}')
    return value  # type: ignore[no-any-return]


def _get(
    source: str, key: str, table: Mapping[str, Any], option: str, default: Any, ok: Callable[[Any], bool], expected: str
) -> Any:
    return Where(source, key).at(option).check(table.get(option, default), ok, expected)


# -- the keys ------------------------------------------------------------------------------------


def _limit_to_toml(limit: ConcurrencyLimit | RateLimit | Debounce | None) -> dict[str, Any] | None:
    if limit is None:
        return None  # off: the key is left out
    return {f.name: str(limit.key) if f.name == "key" else getattr(limit, f.name) for f in fields(limit)}


def _max_held_s(where: Where, raw: Any) -> int:
    return int(where.check(raw, int_in(60, 1209600), "must be an integer from 60 to 1209600 (SQS's 14 days)"))


FLOW_OPTIONS = (
    TypeOption(
        "fairness",
        DOMAIN_KEY,
        lambda where, raw: parse_fairness(where.source, where.key, raw),
        '= "domain"',
        "the MessageGroupId of its messages, so SQS fair queues keep one noisy key's backlog from delaying"
        ' the others: "domain", "params.NAME", "type", or false',
        to_toml=lambda key: str(key) if key is not None else False,
    ),
    TypeOption(
        "concurrency",
        None,
        lambda where, raw: parse_concurrency(where.source, where.key, raw),
        '= { key = "domain", limit = N, if_unavailable = "defer" }',
        "at most N jobs with the same key run at once, across all containers",
        to_toml=_limit_to_toml,
    ),
    TypeOption(
        "rate_limit",
        None,
        lambda where, raw: parse_rate_limit(where.source, where.key, raw),
        '= { key = "domain", per_second = R, burst = B, if_unavailable = "defer" }',
        "at most R jobs a second with the same key (bursts of B, default R)",
        to_toml=_limit_to_toml,
    ),
    TypeOption(
        "debounce",
        None,
        lambda where, raw: parse_debounce(where.source, where.key, raw),
        '= { key = "domain", wait_s = W, max_wait_s = 10*W, if_unavailable = "run" }',
        "of the jobs with the same key pushed less than W s apart, only the latest runs; the others end as"
        ' "debounced"; a steady stream runs every max_wait_s. A key is "domain", "params.NAME" or "type";'
        ' if_unavailable says what a limit does when DynamoDB cannot be reached: "defer" holds the job'
        ' back, "run" runs it without the limit',
        to_toml=_limit_to_toml,
    ),
    TypeOption(
        "max_held_s",
        86400,
        _max_held_s,
        "= 86400",
        "a job a concurrency or rate limit holds back longer than this is dead-lettered (held_too_long);"
        " see docs/flow-control.md",
    ),
)
