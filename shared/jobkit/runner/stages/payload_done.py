"""A large job's params object, once the job has ended.

Push puts the params of a large job in the payload bucket
(:mod:`jobkit.payloads`), one object per push, and the bucket's lifecycle rule
keeps an object as long as any message might still name it: over a year, for
a job that waits for a far release time or sits in a DLQ. S3 bills storage by
the hour, so once a job has ended for good (it ran to success, or was
skipped as a duplicate or a superseded leaf) its runner marks it ended beside
the object and removes the object (S3 does not bill deletes). A late copy
of its message (a lost delete: SQS delivers at least once) finds the mark
and is acknowledged as ``redelivered``, not dead-lettered. A dead-lettered,
debounced or cancelled job keeps its object until the long rule removes it.

This is done at the end of the SQS batch, once every stage has settled: a
batch member whose batch could not count its end goes back to count it
(:mod:`jobkit.runner.stages.batch`) and keeps its object, and an invocation
that dies before then ends nothing. The mark is written first: a mark that
cannot be written leaves the object, and one that cannot be removed stays;
either way the long rule removes it later, which costs storage and loses
nothing.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from jobkit.core.outcome import PUSH_ENDS, RecordResult
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.payloads.reference import ParamsRef
    from jobkit.payloads.store import PayloadStore
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)


class PayloadDone(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> PayloadDone:
        assert kit.payloads is not None
        return cls(kit.payloads)

    def __init__(self, payloads: PayloadStore) -> None:
        self._payloads = payloads
        self._ended: list[tuple[Delivery, ParamsRef]] = []
        self._lock = threading.Lock()  # (jobs side by side settle in their own threads)

    def begin_batch(self) -> None:
        self._ended = []  # a batch that died mid-way ends nothing (its messages come back)

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        # (the message of a push that ended is not needed again: a dead letter's is)
        if delivery is None or delivery.params_ref is None or result.outcome not in PUSH_ENDS:
            return
        with self._lock:
            self._ended.append((delivery, delivery.params_ref))

    def end_batch(self) -> None:
        with self._lock:
            ended, self._ended = self._ended, []
        for delivery, ref in ended:
            if delivery.send_back is not None:  # its message goes back (its batch could not count its end)
                continue
            try:
                self._payloads.end(ref)
            except Exception as exc:  # the long rule removes it later: storage, not loss
                log.warning("could not mark the params object %s ended: %s", ref.key, exc)
