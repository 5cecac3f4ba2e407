"""Keyed concurrency limits: at most N jobs with the same key run at once,
across all containers (:mod:`jobkit.records.leases`).

The batch takes one lease per key before its first job runs, all keys at
once, and gives each back as soon as the last of its jobs in the batch has
settled. A key that is full holds its jobs back (:mod:`jobkit.runner.hold`).
When the jobs table cannot be reached, the type's ``if_unavailable`` decides:
``defer`` (the default) holds the jobs back, ``run`` runs them unlimited.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import RecordResult
from jobkit.core.parallel import Parallel
from jobkit.declaration.config import JobType
from jobkit.records import TableUnavailable
from jobkit.records.leases import Full, Lease, Leases
from jobkit.runner.delivery import Delivery
from jobkit.runner.hold import Hold
from jobkit.runner.keyed import Group, Keyed, by_group, group_of
from jobkit.runner.stage import Later, Stage

if TYPE_CHECKING:
    from concurrent.futures import Future

    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class Concurrency(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Concurrency:
        table = kit.table
        return cls(table.records.leases, kit.clock, parts.hold, table.dedup.parallel)

    def __init__(self, leases: Leases, clock: Clock, hold: Hold, parallel: Parallel) -> None:
        self._leases = leases
        self._clock = clock
        self._hold = hold
        self._parallel = parallel
        self._held: dict[Group, Lease] = {}  # this batch's leases
        self._users: dict[Group, int] = {}  # deliveries admitted under each, not yet settled
        self._releases: list[Future[bool]] = []

    def begin_batch(self) -> None:
        self._held, self._users, self._releases = {}, {}, []

    def admit_batch(self, deliveries: Sequence[Delivery]) -> list[RecordResult | Later | None]:
        groups = by_group(deliveries, _option)
        answers: list[RecordResult | Later | None] = [None] * len(deliveries)
        wanted = [group for group in groups if group not in self._held]
        taken = self._parallel.map(lambda group: self._acquire(deliveries[groups[group][0]]), wanted)
        outcome = dict(zip(wanted, taken, strict=True))
        for group, indexes in groups.items():
            for index in indexes:
                answers[index] = self._answer(deliveries[index], group, outcome.get(group))
        return answers

    def admit(self, delivery: Delivery) -> RecordResult | None:
        group = group_of(delivery, _option)
        if group is None:
            return None
        return self._answer(delivery, group, None if group in self._held else self._acquire(delivery))

    def _acquire(self, delivery: Delivery) -> Lease | Full | TableUnavailable:
        limit = delivery.job_type.concurrency
        assert limit is not None
        now = self._clock.now()
        until = now + delivery.remaining_s(delivery.job_type.timeout_s)
        try:
            return self._leases.acquire(
                delivery.spec.type, limit.key.value(delivery.spec), limit.limit, now=now, until=until
            )
        except TableUnavailable as exc:
            return exc

    def _answer(
        self, delivery: Delivery, group: Group, taken: Lease | Full | TableUnavailable | None
    ) -> RecordResult | None:
        limit = delivery.job_type.concurrency
        assert limit is not None
        shown = limit.key.shown(group[1])
        if isinstance(taken, Lease):
            self._held[group] = taken
        if group in self._held:
            delivery.note(self, group)
            self._users[group] = self._users.get(group, 0) + 1
            return None
        if isinstance(taken, Full):
            # No wait to give: a lease ends when its holder's jobs finish, mostly long before its deadline.
            return self._hold(delivery, None, f"concurrency limit {limit.limit} reached for {shown}")
        log.warning("concurrency limit not checked: %s", taken, extra=delivery.keys)
        if limit.if_unavailable == "run":
            delivery.dedup_unavailable = True
            return None
        return self._hold(delivery, None, f"concurrency limit for {shown} not checked: the jobs table is unavailable")

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        group: Group | None = delivery.noted(self) if delivery is not None else None
        if group is None or group not in self._users:
            return
        self._users[group] -= 1
        if self._users[group] == 0:
            del self._users[group]
            lease = self._held.pop(group)
            self._releases.append(self._parallel.submit(self._leases.release, lease))

    def end_batch(self) -> None:
        releases, self._releases = self._releases, []
        for release in releases:
            try:
                release.result()
            except Exception:
                log.warning("a concurrency lease could not be given back; it lapses at its deadline", exc_info=True)


def _option(job_type: JobType) -> Keyed | None:
    return job_type.concurrency
