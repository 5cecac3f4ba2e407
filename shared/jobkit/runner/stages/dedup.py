"""De-duplication: asks the dedup store whether the job runs, and settles its
claims when the run ends. The store decides, in one order that
docs/deduplication.md states: a deliver_once job's delivery claim, an
ignoreDuplicates job's duplicate claim, then the root record, which only a job
that will run may advance. A job may be superseded by a newer root job, a
duplicate of a later successful run, a redelivery of a job that already ran,
or deferred while its twin runs.

A batch's claims go out together (one round trip, not one per job), and each
job's claims are settled in the background while the next job runs; the batch
ends when the last settle is back. A job that shares a claim key with an
earlier job of the batch is admitted on its own turn, after that job settled.
A job's root is advanced on its turn too, just before it runs, so a root is
never written by a job that does not run. A deliver_once job that succeeded is
marked done before the next job starts."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.errors import SpecError
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.dedup.admission import Admission, Candidate, Verdict
from jobkit.dedup.store import DedupStore
from jobkit.runner.delivery import Delivery
from jobkit.runner.failures import Failures
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import LATER, Later, Run, Stage

if TYPE_CHECKING:
    from concurrent.futures import Future

    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)

#: The note of a delivery claimed with its batch whose root is still to be confirmed.
_CLAIMED = "claimed with the batch"
#: The note of a delivery whose claims its run settled.
_SETTLED = "settled by its run"

#: How long a batch's callback waits when the table cannot claim its delivery (fail-closed).
CALLBACK_WAIT_S = 30
_CALLBACK_WAITS = (
    "the jobs table could not claim its delivery, and a batch_callback type's job runs only once:"
    f" it waits for the table, sent again in {CALLBACK_WAIT_S} s"
)
#: Tries again of a batch_callback job's "done" mark that failed, and the waits before them: a
#: crash of its invocation before the mark is written would let its redelivery run it again.
_DONE_WAITS_S = (0.1, 0.4)

_SKIPPED = {
    Verdict.SUPERSEDED: Outcome.SUPERSEDED,
    Verdict.DUPLICATE: Outcome.DUPLICATE,
    Verdict.REDELIVERED: Outcome.REDELIVERED,
}


class Dedup(Stage):
    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Dedup:
        return cls(kit.table.dedup, kit.clock, parts.requeue, parts.failures)

    def __init__(self, store: DedupStore, clock: Clock, requeue: Requeue, failures: Failures) -> None:
        self._store = store
        self._clock = clock
        self._requeue = requeue
        self._failures = failures
        self._settles: list[tuple[Delivery, Future[bool]]] = []  # this batch's

    def begin_batch(self) -> None:
        self._settles = []  # a batch that died mid-way: its settles are no one's to wait for

    def admit_batch(self, deliveries: Sequence[Delivery]) -> list[RecordResult | Later | None]:
        answers: list[RecordResult | Later | None] = []
        claimable: list[tuple[int, Delivery, Candidate]] = []
        for delivery in deliveries:
            try:
                candidate = self._candidate(delivery)
            except Exception as exc:  # the job's own ignore_duplicates() or dedup_hash(): its record alone
                candidate = self._internal_error(delivery, exc)
            if isinstance(candidate, Candidate):
                claimable.append((len(answers), delivery, candidate))
            answers.append(candidate if isinstance(candidate, RecordResult) else None)
        if not claimable:
            return answers
        admissions = self._store.admit_batch([candidate for _, _, candidate in claimable])
        for (index, delivery, candidate), admission in zip(claimable, admissions, strict=True):
            if admission is None:
                answers[index] = LATER  # it shares a claim key with an earlier job: all of it on its turn
            elif isinstance(admission, Exception):
                answers[index] = self._internal_error(delivery, admission)
            elif admission.root_pending:
                delivery.note(_CLAIMED, (candidate, admission))
                answers[index] = LATER  # its root is advanced on its turn, by a job about to run
            else:
                answers[index] = self._answer(delivery, admission)
        return answers

    def _internal_error(self, delivery: Delivery, exc: Exception) -> RecordResult:
        log.error("de-duplication failed for this job: %r", exc, exc_info=exc, extra=delivery.keys)
        return self._failures.internal_error(delivery.record, exc)

    def admit(self, delivery: Delivery) -> RecordResult | None:
        claimed: tuple[Candidate, Admission] | None = delivery.noted(_CLAIMED)
        if claimed is not None:  # claimed with its batch: only its root is left, now that it is about to run
            return self._answer(delivery, self._store.confirm_root(*claimed))
        candidate = self._candidate(delivery)
        if candidate is None or isinstance(candidate, RecordResult):
            return candidate
        return self._answer(delivery, self._store.admit(candidate))

    def _candidate(self, delivery: Delivery) -> Candidate | RecordResult | None:
        """What the store is asked about the job; None when there is nothing to
        ask (no root params, no ``deliver_once``, duplicates not ignored): it runs,
        and costs no claim, no record and no request."""
        job = delivery.job
        assert job is not None, "the job is built before it is de-duplicated"
        try:
            ignore_duplicates = job.ignore_duplicates()
            if not (ignore_duplicates or delivery.job_type.deliver_once or delivery.spec.has_root_job_params()):
                return None
            return Candidate(
                spec=delivery.spec,
                ignore_duplicates=ignore_duplicates,
                dedup_hash=job.dedup_hash() if ignore_duplicates else None,
                deliver_once=delivery.job_type.deliver_once,
                lease_until=self._clock.now() + delivery.remaining_s(delivery.job_type.timeout_s),
                owes_run=delivery.owes_run,
                waits_for_store=delivery.job_type.batch_callback,
            )
        except SpecError as exc:  # params that parsed but cannot be hashed (nested too deeply to serialise)
            return self._failures.poison(delivery.record, exc)

    def _answer(self, delivery: Delivery, admission: Admission) -> RecordResult | None:
        delivery.note(self, admission)
        if admission.verdict is Verdict.RUN and admission.unavailable and delivery.job_type.batch_callback:
            # a batch's callback runs once, whatever else fails open: it waits for the table (not run: not counted)
            return self._requeue(delivery, CALLBACK_WAIT_S, Outcome.DEFERRED, _CALLBACK_WAITS)
        delivery.dedup_unavailable = delivery.dedup_unavailable or admission.unavailable  # (or a stage before)
        if admission.verdict is Verdict.RUN:
            return None
        if admission.verdict is Verdict.DEFER:
            return self._requeue(delivery, admission.defer_s, Outcome.DEFERRED, admission.reason)
        log.info("job skipped (%s): %s", admission.verdict, admission.reason, extra=delivery.keys)
        outcome = _SKIPPED[admission.verdict]
        return delivery.result(outcome, reason=admission.reason, dedup_unavailable=delivery.dedup_unavailable)

    def finish(self, delivery: Delivery, run: Run) -> None:
        admission: Admission | None = delivery.noted(self)
        if admission is None or not admission.claim_keys:
            return
        delivery.note(_SETTLED, True)
        if admission.delivery is not None and run.succeeded:
            # A deliver_once job's "done" lands before the next job starts: if that
            # job kills the invocation, this one must not run again on redelivery.
            for wait in (*(_DONE_WAITS_S if delivery.job_type.batch_callback else ()), None):
                if self._store.finish(admission, succeeded=True, started_at=run.started_at):
                    return
                if wait is None:
                    delivery.dedup_unavailable = True
                    return
                time.sleep(wait)
        # Anything else settles while the next job runs: losing it costs work, not a promise.
        settle = self._store.settle_in_background(admission, succeeded=run.succeeded, started_at=run.started_at)
        self._settles.append((delivery, settle))

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        """A job admitted with its claims that did not run after all (handed back
        for lack of time): its claims go back now, as a failed attempt's do, so
        that its copy, and its twins, run."""
        if delivery is None or delivery.noted(_SETTLED):
            return
        claimed: tuple[Candidate, Admission] | None = delivery.noted(_CLAIMED)
        admission: Admission | None = delivery.noted(self) or (claimed[1] if claimed is not None else None)
        if admission is None or not admission.claim_keys:
            return
        if admission.verdict is not Verdict.RUN and not admission.root_pending:
            return
        settle = self._store.settle_in_background(admission, succeeded=False, started_at=self._clock.now())
        self._settles.append((delivery, settle))

    def end_batch(self) -> None:
        """Wait for the batch's settles; one the store could not write counts as
        the store being unavailable (its claims lapse with their leases)."""
        settles, self._settles = self._settles, []
        for delivery, settle in settles:
            try:
                settled = settle.result()
            except Exception:
                log.exception("settling the claims of a job failed; they lapse with their leases", extra=delivery.keys)
                settled = False
            if not settled:
                delivery.dedup_unavailable = True
