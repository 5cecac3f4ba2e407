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
stale leaves in its own batch), and a job admitted on its turn (it shares a
claim with an earlier job of the batch, and must see that job's end). Each
job keeps everything it has alone: its stages' hooks, its failure, its
deadline watchdog, its log keys and correlation ID (each runs in a copy of the
batch's context), and its line in the partial batch failure report.

What escapes a job (a crash, an out-of-memory kill, as the tests simulate
one) ends the invocation unreported, as it would on Lambda: once the jobs
beside it have ended, it is raised, and no later job starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from jobkit.core.parallel import Parallel

if TYPE_CHECKING:
    from concurrent.futures import Future

    from jobkit.runner.delivery import Delivery

R = TypeVar("R")


class Pending(Protocol):
    """A record of the batch, as the runner holds it once the batch is admitted."""

    @property
    def delivery(self) -> Delivery | None: ...
    @property
    def result(self) -> object | None: ...
    @property
    def resume_at(self) -> int | None: ...


E = TypeVar("E", bound=Pending)


class SideBySide:
    """Runs a batch's jobs, side by side where their types allow it.

    Args:
        limits: each type's ``batch_concurrency``.
    """

    def __init__(self, limits: Mapping[str, int]) -> None:
        self._limits = {name: limit for name, limit in limits.items() if limit > 1}
        self._parallel = Parallel(max(self._limits.values(), default=1))
        self._slots = {name: threading.BoundedSemaphore(limit) for name, limit in self._limits.items()}

    def together(self, entry: Pending) -> bool:
        """Whether the job may run beside the batch's others."""
        delivery = entry.delivery
        return (
            delivery is not None
            and entry.result is None
            and entry.resume_at is None
            and delivery.job_type.name in self._limits
            and not delivery.spec.has_root_job_params()
        )

    def finish(self, entries: Sequence[E], order: Sequence[int], finish: Callable[[E], R]) -> dict[int, R]:
        """``finish(entries[i])`` for each ``i`` of ``order``: first the jobs that
        may run side by side, at once; then the others, one after another, in order."""
        together = [i for i in order if self.together(entries[i])] if self._limits else []
        if len(together) < 2:
            return {i: finish(entries[i]) for i in order}
        futures: dict[int, Future[R]] = {i: self._parallel.submit(self._in_slot, entries[i], finish) for i in together}
        done: dict[int, R] = {}
        escaped: BaseException | None = None
        for index, future in futures.items():
            try:
                done[index] = future.result()
            except BaseException as exc:  # the invocation dies: once the jobs beside it have ended
                escaped = escaped or exc
        if escaped is not None:
            raise escaped
        for index in order:
            if index not in done:
                done[index] = finish(entries[index])
        return done

    def _in_slot(self, entry: E, finish: Callable[[E], R]) -> R:
        delivery = entry.delivery
        assert delivery is not None
        with self._slots[delivery.job_type.name]:
            return finish(entry)
