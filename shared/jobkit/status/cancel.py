"""Cancellation as a runner sees it: which of a batch's jobs a cancellation
covers, and the check a running job makes (``self.cancelled()``).

A runner reads, per batch, one item set per ``cancellable`` type of the batch
(:meth:`jobkit.records.cancellations.Cancellations.of_type`: the type's mark
and each domain's ``cancel_all`` watermark); only a job enqueued at or before
the type's newest job cancellation costs a read of its own record. With
nothing cancelled, a full batch of 10 costs one read: 0.1 per job.

A job's own record decides over a watermark: an operator who lifts the
cancellation of one job (``jobkit dlq redrive --uncancel``) lets it run though
``cancel_all`` covers it. A cancellation covers the pushes of its job ID that
were enqueued at or before it was recorded, by the two hosts' clocks: keep
them on NTP (docs/architecture.md, "Clocks").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.records import TableUnavailable
from jobkit.records.cancellations import Cancellation, TypeCancellations, Watermark
from jobkit.records.keys import JobRef

if TYPE_CHECKING:
    from jobkit.core.spec import JobSpecification
    from jobkit.records.store import Records

log = logging.getLogger(__name__)

#: The least time between two reads a running job's ``self.cancelled()`` makes.
CHECK_EVERY_S = 5.0

Cover = Cancellation | Watermark


class CancelCheck:
    """The runner's reads of its cancellable types' cancellations."""

    def __init__(self, records: Records) -> None:
        self._cancellations = records.cancellations

    def of_batch(self, specs: Sequence[JobSpecification]) -> list[Cover | None]:
        """What covers each job, if anything: one query per type of the batch.

        Raises:
            TableUnavailable: the table could not answer.
        """
        views: dict[str, TypeCancellations] = {}
        covers = []
        for spec in specs:
            view = views.get(spec.type)
            if view is None:
                view = views[spec.type] = self._cancellations.of_type(spec.type)
            covers.append(self.covering(view, spec))
        return covers

    def of_job(self, spec: JobSpecification) -> Cover | None:
        """What covers one job now (for a running job's check)."""
        return self.covering(self._cancellations.of_type(spec.type), spec)

    def covering(self, view: TypeCancellations, spec: JobSpecification) -> Cover | None:
        if view.may_cancel_job(spec.enqueued_at):
            own = self._cancellations.of_job(JobRef(spec.type, spec.domain, spec.id))
            if own is not None and (spec.enqueued_at is None or spec.enqueued_at <= own.at):
                return None if own.lifted else own  # this push's own record decides, over a watermark
        watermark = view.watermarks.get(spec.domain)
        return watermark if watermark is not None and watermark.covers(spec.enqueued_at) else None


class CancelWatch:
    """A running job's ``self.cancelled()``: a read at most every
    :data:`CHECK_EVERY_S` (the first one that long after the runner's check
    at admission), and once it saw a cancellation, it says so without asking again.

    A read that fails is logged and answers False: the job goes on.
    """

    def __init__(self, check: CancelCheck, spec: JobSpecification, clock: Clock, checked_at: float) -> None:
        self._check = check
        self._spec = spec
        self._clock = clock
        self._checked_at = checked_at
        self.seen: Cover | None = None

    def __call__(self) -> bool:
        if self.seen is not None:
            return True
        now = self._clock.now()
        if now - self._checked_at < CHECK_EVERY_S:
            return False
        self._checked_at = now
        try:
            self.seen = self._check.of_job(self._spec)
        except TableUnavailable as exc:
            log.warning(
                "could not read the cancellations of %s %s: it goes on: %s",
                self._spec.type,
                self._spec.id,
                exc,
                extra={"job_id": self._spec.id, "job_type": self._spec.type},
            )
            return False
        return self.seen is not None
