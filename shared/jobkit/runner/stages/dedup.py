"""De-duplication: asks the dedup store whether the job runs, and settles its
claims when the run ends. The store decides, in one order that
docs/deduplication.md states: a deliver_once job's delivery claim, an
ignoreDuplicates job's duplicate claim, then the root record, which only a job
that will run may advance. A job may be superseded by a newer root job, a
duplicate of a later successful run, a redelivery of a job that already ran,
or deferred while its twin runs."""

from __future__ import annotations

import logging

from jobkit.clock import Clock
from jobkit.dedup import Admission, Candidate, DedupStore, Verdict
from jobkit.errors import SpecError
from jobkit.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery
from jobkit.runner.failures import Failures
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Run, Stage

log = logging.getLogger(__name__)

_SKIPPED = {
    Verdict.SUPERSEDED: Outcome.SUPERSEDED,
    Verdict.DUPLICATE: Outcome.DUPLICATE,
    Verdict.REDELIVERED: Outcome.REDELIVERED,
}


class Dedup(Stage):
    def __init__(self, store: DedupStore, clock: Clock, requeue: Requeue, failures: Failures) -> None:
        self._store = store
        self._clock = clock
        self._requeue = requeue
        self._failures = failures

    def admit(self, delivery: Delivery) -> RecordResult | None:
        job = delivery.job
        assert job is not None, "the job is built before it is de-duplicated"
        try:
            ignore_duplicates = job.ignore_duplicates()
            candidate = Candidate(
                spec=delivery.spec,
                ignore_duplicates=ignore_duplicates,
                dedup_hash=job.dedup_hash() if ignore_duplicates else None,
                deliver_once=delivery.job_type.deliver_once,
                lease_until=self._clock.now() + delivery.remaining_s(delivery.job_type.timeout_s),
            )
        except SpecError as exc:  # params that parsed but cannot be hashed (nested too deeply to serialise)
            return self._failures.poison(delivery.record, exc)
        admission = self._store.admit(candidate)
        delivery.note(self, admission)
        if admission.verdict is Verdict.RUN:
            return None
        if admission.verdict is Verdict.DEFER:
            return self._requeue(delivery, admission.defer_s, Outcome.DEFERRED, admission.reason)
        log.info("job skipped (%s): %s", admission.verdict, admission.reason, extra=delivery.keys)
        outcome = _SKIPPED[admission.verdict]
        return delivery.result(outcome, reason=admission.reason, dedup_unavailable=admission.unavailable)

    def finish(self, delivery: Delivery, run: Run) -> None:
        admission: Admission | None = delivery.noted(self)
        if admission is None:
            return
        settled = self._store.finish(admission, succeeded=run.succeeded, started_at=run.started_at)
        if admission.unavailable or not settled:
            run.dedup_unavailable = True
