"""Cancellation as a runner sees it: which of a batch's jobs a cancellation
covers, and the check a running job makes (``self.cancelled()``).

A runner reads, per batch, the mark of each ``cancellable`` type of the batch
(:meth:`jobkit.records.cancellations.Cancellations.mark`: one item). Only a
job enqueued at or before the type's newest job cancellation reads its own
record, and only one enqueued at or before its latest watermark reads its
domain's watermark (once per batch and domain). With nothing cancelled, a
batch of 10 costs one read: 0.1 per job.

Of the cancellations and the lifts that concern a push, the one recorded
last decides: an operator who lifts the cancellations of a push (``jobkit dlq
redrive --uncancel``) lets that push run though a ``cancel_all`` recorded
before the lift covers it, and a cancellation recorded after the lift
cancels it again. A lift is read only when a job's record says one came
after its cancellations.
A cancellation covers the pushes of its job ID that were enqueued at or
before it was recorded, by the two hosts' clocks: keep them on NTP
(docs/architecture.md, "Clocks").

A read that fails leaves the jobs that needed it unknown (:data:`UNREAD`):
they run (fail-open, as de-duplication does), and the others of the batch
are judged as usual.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Final, TypeVar

from jobkit.core.clock import Clock
from jobkit.records import TableUnavailable
from jobkit.records.cancellations import Cancellation, TypeMark, Watermark
from jobkit.records.keys import JobRef

if TYPE_CHECKING:
    from jobkit.core.spec import JobSpecification
    from jobkit.records.store import Records

log = logging.getLogger(__name__)

#: The least time between two reads a running job's ``self.cancelled()`` makes,
#: and the age of its batch's check after which a job is checked again before it starts.
CHECK_EVERY_S = 5.0

Cover = Cancellation | Watermark
T = TypeVar("T")


class _Unread(Enum):
    UNREAD = "unread"


#: A job whose cancellations could not be read: it runs (fail-open).
UNREAD: Final = _Unread.UNREAD
Verdict = Cover | None | _Unread


class CancelCheck:
    """The runner's reads of its cancellable types' cancellations."""

    def __init__(self, records: Records) -> None:
        self._cancellations = records.cancellations

    def of_batch(self, specs: Sequence[JobSpecification]) -> list[Verdict]:
        """What covers each job, if anything: one read per type of the batch,
        and the job records and watermarks its marks call for."""
        marks: dict[str, TypeMark | _Unread] = {}
        watermarks: dict[tuple[str, str | None], Watermark | _Unread | None] = {}
        verdicts: list[Verdict] = []
        for spec in specs:
            mark = marks.get(spec.type)
            if mark is None:
                mark = marks[spec.type] = self._read(partial(self._cancellations.mark, spec.type))
            verdicts.append(UNREAD if mark is UNREAD else self._covering(mark, spec, watermarks))
        return verdicts

    def of_job(self, spec: JobSpecification) -> Verdict:
        """What covers one job now (a running job's check, a check before a job starts)."""
        mark = self._read(partial(self._cancellations.mark, spec.type))
        return UNREAD if mark is UNREAD else self._covering(mark, spec, {})

    def _covering(
        self,
        mark: TypeMark,
        spec: JobSpecification,
        watermarks: dict[tuple[str, str | None], Watermark | _Unread | None],
    ) -> Verdict:
        enqueued = spec.enqueued_at
        own: Cancellation | _Unread | None = None
        if mark.may_have_own(enqueued):
            ref = JobRef(spec.type, spec.domain, spec.id)
            own = self._read(partial(self._cancellations.of_job, ref))
        watermark: Watermark | _Unread | None = None
        if mark.may_have_watermark(enqueued):
            key = (spec.type, spec.domain)
            if key not in watermarks:
                watermarks[key] = self._read(partial(self._cancellations.watermark, spec.type, spec.domain))
            watermark = watermarks[key]
        if own is UNREAD or watermark is UNREAD:
            return UNREAD
        ref = JobRef(spec.type, spec.domain, spec.id)
        return self._read(partial(self._cancellations.deciding, ref, enqueued, own, watermark))

    @staticmethod
    def _read(read: Callable[[], T]) -> T | _Unread:
        try:
            return read()
        except TableUnavailable as exc:
            log.warning("could not read cancellations: the jobs that need them go on: %s", exc)
            return UNREAD


class CancelWatch:
    """A running job's ``self.cancelled()``: a read at most every
    :data:`CHECK_EVERY_S` (the first one that long after the runner's check
    of its batch), and once it saw a cancellation, it says so without asking again.

    A read that fails is logged and answers False: the job goes on.
    """

    def __init__(self, check: CancelCheck, spec: JobSpecification, clock: Clock, checked_at: float) -> None:
        self._check = check
        self._spec = spec
        self._clock = clock
        self._checked_at = checked_at
        self.seen: Cover | None = None
        self.unread = False  # its last read failed (the job went on)

    def __call__(self, *, now_or_never: bool = False) -> bool:
        """Whether a cancellation covers the job; ``now_or_never`` reads now, however recent the last read."""
        if self.seen is not None:
            return True
        now = self._clock.now()
        if now - self._checked_at < CHECK_EVERY_S and not now_or_never:
            return False
        self._checked_at = now
        verdict = self._check.of_job(self._spec)
        self.unread = verdict is UNREAD
        if verdict is UNREAD or verdict is None:
            return False
        self.seen = verdict
        return True
