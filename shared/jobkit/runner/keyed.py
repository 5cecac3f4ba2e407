"""A batch's deliveries by flow-control key: the group a limit takes one lease
or one block of tokens for (:mod:`jobkit.runner.stages.concurrency`,
:mod:`jobkit.runner.stages.rate_limit`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from jobkit.declaration.config import JobType
from jobkit.flow.options import FlowKey
from jobkit.runner.delivery import Delivery

Group = tuple[str, str]  # (job type, key value)


class Keyed(Protocol):
    @property
    def key(self) -> FlowKey: ...


#: Which of a type's options a stage counts by (``lambda t: t.concurrency``).
Option = Callable[[JobType], Keyed | None]


def group_of(delivery: Delivery, option: Option) -> Group | None:
    """The delivery's group under ``option``, or None when its type does not declare it."""
    declared = option(delivery.job_type)
    if declared is None:
        return None
    return delivery.spec.type, declared.key.value(delivery.spec)


def by_group(deliveries: Sequence[Delivery], option: Option) -> dict[Group, list[int]]:
    """The indexes of the deliveries in each group, in the batch's order."""
    groups: dict[Group, list[int]] = {}
    for index, delivery in enumerate(deliveries):
        group = group_of(delivery, option)
        if group is not None:
            groups.setdefault(group, []).append(index)
    return groups
