"""Jobs of one batch side by side: a type's ``batch_concurrency``.

Lambda bills an invocation for its duration, and a job that waits on the
network spends it idle: ten such jobs waiting one after another cost ten times
the duration of ten waiting together. A type with ``batch_concurrency = N``
(N > 1) runs up to N of a batch's jobs at once, on threads of a pool made on
first use (a container whose types keep the default of 1 starts none).

Only jobs whose order cannot matter run side by side: jobs admitted in full
(every stage said yes before any job ran), whose params carry no root. The
others run after them, one after another in the order the runner chose, as
with ``batch_concurrency = 1``: root jobs and leaves (a root supersedes its
stale leaves in its own batch), a job admitted on its turn (it shares a
claim with an earlier job of the batch, and must see that job's end), a job
delivered twice in the batch, and every job of a type with a concurrency
limit (one lease per key covers the batch's jobs of that key: they must not
overlap). Each
job keeps everything it has alone: its stages' hooks, its failure, its
deadline watchdog, its log keys and correlation ID (each runs in a copy of the
batch's context), and its line in the partial batch failure report.

A job is never handed back for lack of time while jobs beside it run (a copy
sent while one of them may still overrun the deadline would run twice): a
job that the time left does not fit when its slot comes waits for the jobs
beside it to end, and then goes as one job after another would.

What escapes a job (a crash, an out-of-memory kill, as the tests simulate
one) ends the invocation unreported, as it would on Lambda: once the jobs
beside it have ended, it is raised, and no later job starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from jobkit.core.parallel import Parallel
from jobkit.runner.batch import Entry

if TYPE_CHECKING:
    from concurrent.futures import Future

#: Threads a runner runs jobs on, at most, whatever its types ask for.
MAX_THREADS = 100

R = TypeVar("R")

#: A job that did not start beside the others (the time left did not fit it).
_NOT_STARTED = object()


class SideBySide:
    """Runs a batch's jobs, side by side where their types allow it.

    Args:
        limits: each type's ``batch_concurrency``; a type with a concurrency
            limit (``concurrency``) runs its jobs one at a time whatever it says,
            since one lease per key covers the batch's jobs of that key.
    """

    def __init__(self, limits: Mapping[str, int], limited: Collection[str] = ()) -> None:
        self._limits = {name: limit for name, limit in limits.items() if limit > 1 and name not in limited}
        self._parallel = Parallel(min(MAX_THREADS, sum(self._limits.values())) or 1)
        self._slots = {name: threading.BoundedSemaphore(limit) for name, limit in self._limits.items()}

    def together(self, entry: Entry, twice: Collection[tuple[str, str | None, str]] = ()) -> bool:
        """Whether the job may run beside the batch's others."""
        delivery = entry.delivery
        if delivery is None or entry.result is not None or entry.resume_at is not None:
            return False
        spec = delivery.spec
        return (
            delivery.job_type.name in self._limits
            and not spec.has_root_job_params()
            and (spec.type, spec.domain, spec.id) not in twice
        )

    def finish(
        self,
        entries: Sequence[Entry],
        order: Sequence[int],
        finish: Callable[..., R],
        *,
        fits: Callable[[Entry], bool] = lambda entry: True,
    ) -> dict[int, R]:
        """``finish(entries[i])`` for each ``i`` of ``order``: first the jobs that
        may run side by side, at once (as ``finish(entry, beside=True)``), each
        as it gets a slot if ``fits(entry)`` then; then the others, one after
        another, in order, with those that did not fit."""
        twice = _twice(entries) if self._limits else set()
        together = [i for i in order if self.together(entries[i], twice)] if self._limits else []
        if len(together) < 2:
            return {i: finish(entries[i]) for i in order}
        dying = threading.Event()  # a job killed the invocation: no job starts after it
        futures: dict[int, Future[Any]] = {
            i: self._parallel.submit(self._in_slot, entries[i], finish, fits, dying) for i in together
        }
        done: dict[int, R] = {}
        escaped: BaseException | None = None
        for index, future in futures.items():
            try:
                answer = future.result()
            except BaseException as exc:  # the invocation dies: once the jobs beside it have ended
                escaped = escaped or exc
                continue
            if answer is not _NOT_STARTED:
                done[index] = answer
        if escaped is not None:
            raise escaped
        for index in order:
            if index not in done:
                done[index] = finish(entries[index])
        return done

    def _in_slot(
        self, entry: Entry, finish: Callable[..., R], fits: Callable[[Entry], bool], dying: threading.Event
    ) -> Any:
        delivery = entry.delivery
        assert delivery is not None
        with self._slots[delivery.job_type.name]:
            if dying.is_set() or not fits(entry):
                return _NOT_STARTED
            try:
                return finish(entry, beside=True)
            except BaseException:
                dying.set()
                raise


def _twice(entries: Sequence[Entry]) -> set[tuple[str, str | None, str]]:
    """The jobs (type, domain, ID) with more than one delivery in the batch: they
    run one after another, as their status and final-attempt records expect."""
    seen: set[tuple[str, str | None, str]] = set()
    twice: set[tuple[str, str | None, str]] = set()
    for entry in entries:
        if entry.delivery is not None:
            spec = entry.delivery.spec
            job = (spec.type, spec.domain, spec.id)
            (twice if job in seen else seen).add(job)
    return twice
