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
A cancellation covers the pushes of its job ID whose producer stamped them
(``enqueuedAt``) at or before it was recorded, by the two hosts' clocks: keep
them on NTP (docs/architecture.md, "Clocks"). Every copy of a push carries
its stamp, so a hop, a retry, a redrive and a producer's resend of the same
body are all covered alike (:class:`~jobkit.records.keys.Push`).

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
from jobkit.records.keys import Push

if TYPE_CHECKING:
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

    def of_batch(self, pushes: Sequence[Push]) -> list[Verdict]:
        """What covers each push, if anything: one read per type of the batch,
        and the job records and watermarks its marks call for."""
        marks: dict[str, TypeMark | _Unread] = {}
        watermarks: dict[tuple[str, str | None], Watermark | _Unread | None] = {}
        verdicts: list[Verdict] = []
        for push in pushes:
            mark = marks.get(push.job_type)
            if mark is None:
                mark = marks[push.job_type] = self._read(partial(self._cancellations.mark, push.job_type))
            verdicts.append(UNREAD if mark is UNREAD else self._covering(mark, push, watermarks))
        return verdicts

    def of_job(self, push: Push) -> Verdict:
        """What covers one push now (a running job's check, a check before a job starts)."""
        mark = self._read(partial(self._cancellations.mark, push.job_type))
        return UNREAD if mark is UNREAD else self._covering(mark, push, {})

    def _covering(
        self,
        mark: TypeMark,
        push: Push,
        watermarks: dict[tuple[str, str | None], Watermark | _Unread | None],
    ) -> Verdict:
        enqueued = push.enqueued_at
        own: Cancellation | _Unread | None = None
        if mark.may_have_own(enqueued):
            own = self._read(partial(self._cancellations.of_job, push.ref))
        watermark: Watermark | _Unread | None = None
        if mark.may_have_watermark(enqueued):
            key = (push.job_type, push.domain)
            if key not in watermarks:
                watermarks[key] = self._read(partial(self._cancellations.watermark, push.job_type, push.domain))
            watermark = watermarks[key]
        if own is UNREAD or watermark is UNREAD:
            return UNREAD
        return self._read(partial(self._cancellations.deciding, push.ref, enqueued, own, watermark))

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

    def __init__(self, check: CancelCheck, push: Push, clock: Clock, checked_at: float) -> None:
        self._check = check
        self._push = push
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
        verdict = self._check.of_job(self._push)
        self.unread = verdict is UNREAD
        if verdict is UNREAD or verdict is None:
            return False
        self.seen = verdict
        return True
