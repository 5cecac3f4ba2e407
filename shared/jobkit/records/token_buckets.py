"""Rate limits: a token bucket per key in the jobs table, kept as one number.

The bucket is the generic cell rate algorithm: the item ``{type}#rate#{key}``
holds ``tat``, the time at which the bucket would be full again. Taking ``n``
tokens moves it ``n / per_second`` later, and is allowed while it stays at
most ``burst / per_second`` ahead of now. So a take is one conditional
update, and when the bucket is busy it *adds* to ``tat`` rather than setting
it: containers that take tokens at the same moment do not race, they queue.

A container takes the tokens its batch needs for a key in one request (a
block), so a batch of ten jobs with one key costs one request, or two when
the bucket had fewer tokens than it guessed.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from jobkit.flow.options import RateLimit
from jobkit.records.keys import NO_SORT, Kind, partition_key
from jobkit.records.table import Absent, AtLeast, AtMost, Below, ConditionFailed, Item, Table

#: How long an item outlives a full bucket (TTL).
IDLE_TTL_S = 24 * 3600
#: Slack when comparing times, in seconds: epoch seconds as floats carry about
#: 0.2 µs of rounding, which must not cost a token (nor, at very high rates, grant one).
_EPSILON_S = 1e-5
#: Keys whose last seen state a container remembers (a guess of which write to try first).
_SEEN_KEYS = 10_000


@dataclass(frozen=True)
class Grant:
    """Tokens taken: ``granted`` of those asked for. The rest may try again in
    ``wait_s`` (the time until the next token), ``wait_s`` apart."""

    granted: int
    wait_s: float


class TokenBuckets:
    """Token buckets in the jobs table; a take is one request, or two when the
    first guess of the bucket's state was wrong. Raises
    :class:`~jobkit.records.TableUnavailable` when the table cannot be reached."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._seen: OrderedDict[tuple[str, str], float] = OrderedDict()  # the last tat seen per key

    def take(self, job_type: str, key: str, limit: RateLimit, wanted: int, *, now: float) -> Grant:
        """Take up to ``wanted`` tokens of ``key``'s bucket."""
        interval = 1.0 / limit.per_second
        window = limit.burst * interval  # how far ahead of now tat may run
        item_key = (partition_key(job_type, Kind.RATE, key), NO_SORT)
        tat = self._seen.get((job_type, key))
        for _ in range(2):
            base = now if tat is None or tat < now else tat
            slack = min(_EPSILON_S, interval / 100)
            count = min(wanted, limit.burst, math.floor((now + window - base + slack) / interval))
            if count < 1:  # empty: the next token comes when tat is a token's time inside the window
                return Grant(0, max(interval, base + interval - (now + window)))
            expires_at = int(now + window) + IDLE_TTL_S
            try:
                if base == now:  # the bucket is full (or was): start it over from now
                    when = Absent("tat") | Below("tat", now)
                    self._table.update(item_key, {"tat": now + count * interval, "expires_at": expires_at}, when=when)
                else:  # busy: queue behind whoever took tokens last, whatever tat is now
                    when = AtLeast("tat", now) & AtMost("tat", now + window - count * interval)
                    self._table.update(item_key, {"expires_at": expires_at}, add={"tat": count * interval}, when=when)
            except ConditionFailed as lost:
                tat = _tat(lost.item)
                continue
            after = base + count * interval
            self._remember((job_type, key), after)
            return Grant(count, max(interval, after + interval - (now + window)))
        # Lost twice to other containers taking this key's tokens: come back a token later.
        self._seen.pop((job_type, key), None)
        return Grant(0, interval)

    def _remember(self, key: tuple[str, str], tat: float) -> None:
        self._seen[key] = tat
        self._seen.move_to_end(key)
        while len(self._seen) > _SEEN_KEYS:
            self._seen.popitem(last=False)


def _tat(item: Item | None) -> float | None:
    value = (item or {}).get("tat")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
