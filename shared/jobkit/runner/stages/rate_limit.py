"""Keyed rate limits: at most R jobs a second with the same key start, with
bursts of B (:mod:`jobkit.records.token_buckets`).

The batch takes the tokens each key needs in one request per key, all keys
at once. The jobs of a key that got fewer tokens than it has jobs run in the
batch's order up to the tokens; the rest are held back
(:mod:`jobkit.runner.hold`) for at least the time their tokens take to come,
spaced one token apart. When the jobs table cannot be reached, the type's
``if_unavailable`` decides: ``defer`` (the default) or ``run``.

A limit counts starts, and a batch's jobs start one after another: a job
that got a token with its batch uses it if it starts within
:func:`fresh_s` of the take (one second, or one token's time if longer);
a job that starts later, behind slow ones, takes a token of its own then.
So the granted jobs are admitted on their turn (:data:`LATER`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import RecordResult
from jobkit.core.parallel import Parallel
from jobkit.declaration.config import JobType
from jobkit.flow.options import RateLimit
from jobkit.records import TableUnavailable
from jobkit.records.token_buckets import Grant, TokenBuckets
from jobkit.runner.delivery import Delivery
from jobkit.runner.hold import Hold
from jobkit.runner.keyed import Group, Keyed, by_group, group_of
from jobkit.runner.stage import LATER, Later, Stage

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class RateLimited(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> RateLimited:
        table = kit.table
        return cls(table.records.token_buckets, kit.clock, parts.hold, table.dedup.parallel)

    def __init__(self, buckets: TokenBuckets, clock: Clock, hold: Hold, parallel: Parallel) -> None:
        self._buckets = buckets
        self._clock = clock
        self._hold = hold
        self._parallel = parallel

    def admit_batch(self, deliveries: Sequence[Delivery]) -> list[RecordResult | Later | None]:
        groups = by_group(deliveries, _option)
        answers: list[RecordResult | Later | None] = [None] * len(deliveries)
        keys = list(groups)
        grants = self._parallel.map(lambda group: self._take(deliveries[groups[group][0]], len(groups[group])), keys)
        taken_at = self._clock.now()
        for group, grant in zip(keys, grants, strict=True):
            for position, index in enumerate(groups[group]):
                answer = self._answer(deliveries[index], group, grant, position)
                if answer is None and isinstance(grant, Grant):
                    deliveries[index].note(self, taken_at)  # its token, good while fresh
                    answers[index] = LATER
                else:
                    answers[index] = answer
        return answers

    def admit(self, delivery: Delivery) -> RecordResult | None:
        group = group_of(delivery, _option)
        if group is None:
            return None
        limit = delivery.job_type.rate_limit
        assert limit is not None
        taken_at: float | None = delivery.noted(self)
        if taken_at is not None and self._clock.now() - taken_at <= fresh_s(limit):
            return None
        return self._answer(delivery, group, self._take(delivery, 1), 0)

    def _take(self, delivery: Delivery, wanted: int) -> Grant | TableUnavailable:
        limit = delivery.job_type.rate_limit
        assert limit is not None
        try:
            return self._buckets.take(
                delivery.spec.type, limit.key.value(delivery.spec), limit, wanted, now=self._clock.now()
            )
        except TableUnavailable as exc:
            return exc

    def _answer(
        self, delivery: Delivery, group: Group, grant: Grant | TableUnavailable, position: int
    ) -> RecordResult | None:
        limit = delivery.job_type.rate_limit
        assert limit is not None
        shown = limit.key.shown(group[1])
        if isinstance(grant, Grant):
            if position < grant.granted:
                return None
            wait_s = grant.wait_s + (position - grant.granted) / limit.per_second
            return self._hold(delivery, wait_s, f"rate limit {limit.per_second:g}/s reached for {shown}")
        log.warning("rate limit not checked: %s", grant, extra=delivery.keys)
        if limit.if_unavailable == "run":
            delivery.dedup_unavailable = True
            return None
        return self._hold(delivery, None, f"rate limit for {shown} not checked: the jobs table is unavailable")


def fresh_s(limit: RateLimit) -> float:
    """How long a token taken with the batch stays good for a job of it."""
    return max(1.0, 1.0 / limit.per_second)


def _option(job_type: JobType) -> Keyed | None:
    return job_type.rate_limit
