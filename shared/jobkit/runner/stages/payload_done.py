"""A large job's params object, once the job has ended.

Push puts the params of a large job in the payload bucket
(:mod:`jobkit.payloads`), and the bucket's lifecycle rule keeps an object as
long as any message might still name it: months, for a job that waits for a
far release time or sits in a DLQ. S3 bills storage by the day, so once a job
has ended for good (it ran to success, or was skipped: a duplicate, a
superseded leaf, debounced, cancelled) its object is tagged, and a second
rule removes tagged objects a day later: time enough for a late duplicate of
its message to find it. A dead-lettered job keeps its object untagged, for
``jobkit dlq show --params`` and its redrive.

Deleting the object at once (S3 does not bill deletes) would make a duplicate
delivery of a job that succeeded dead-letter as ``PayloadMissing``. A tag that
cannot be written leaves the object to the long rule: it costs storage, and
loses nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from jobkit.core.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.payloads.store import PayloadStore
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)

#: Final outcomes whose message the DLQ keeps: their objects stay for `dlq show --params` and the redrive.
_KEPT = frozenset({Outcome.DEAD_LETTERED, Outcome.POISONED})


class PayloadDone(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> PayloadDone:
        assert kit.payloads is not None
        return cls(kit.payloads)

    def __init__(self, payloads: PayloadStore) -> None:
        self._payloads = payloads

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        if delivery is None or delivery.params_ref is None:
            return
        if not result.outcome.is_final or result.outcome in _KEPT or delivery.send_back is not None:
            return
        try:
            self._payloads.mark_done(delivery.params_ref)
        except Exception as exc:  # the long rule removes it later: storage, not loss
            log.warning("could not tag the params object %s as done: %s", delivery.params_ref.key, exc)
