"""moto's CloudWatch with percentiles (:func:`cloudwatch_percentiles`), and a
way to forget old datapoints (:func:`drop_metric_data_before`)."""

from __future__ import annotations

import contextlib
import importlib
import math
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

_PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?|100)")


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile (0 < p <= 100), or None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


@contextlib.contextmanager
def cloudwatch_percentiles() -> Iterator[None]:
    statistics_class = importlib.import_module("moto.cloudwatch.models").Statistics
    original = statistics_class.get_statistics_for_type

    def get_statistics_for_type(self: Any, stat: str) -> Any:
        match = _PERCENTILE.fullmatch(stat)
        if match is None or float(match[1]) == 0:
            return original(self, stat)
        return percentile(self.metric_single_values_list, float(match[1]))

    statistics_class.get_statistics_for_type = get_statistics_for_type
    try:
        yield
    finally:
        statistics_class.get_statistics_for_type = original


def drop_metric_data_before(account_id: str, region: str, when: float) -> int:
    """Forget the datapoints of moto's CloudWatch stamped before ``when``
    (epoch seconds), from the front of its list, where they arrive in time
    order; one sent late with an old stamp stays. Returns how many were dropped.

    The list is cut in place, in one step, so a datapoint that another thread
    appends meanwhile is kept."""
    from moto.cloudwatch.models import cloudwatch_backends

    data: list[Any] = cloudwatch_backends[account_id][region].metric_data
    cutoff = datetime.fromtimestamp(when, UTC)
    naive_cutoff = cutoff.replace(tzinfo=None)
    count = 0
    for datum in data:  # stops at the first recent one
        stamp = datum.timestamp
        if stamp >= (naive_cutoff if stamp.tzinfo is None else cutoff):
            break
        count += 1
    if count:
        del data[:count]
    return count
