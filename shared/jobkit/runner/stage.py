"""A stage of the runner: one concern of handling a delivery, in one class.

At the start of each SQS batch the runner calls ``begin_batch()``. Then it
turns each record into a :class:`~jobkit.runner.delivery.Delivery`
(or poison), and calls each stage's hooks in the order the stages are
declared (:data:`jobkit.runner.stages.STAGES`):

1. ``admit_batch(deliveries)``, stage after stage, each with the batch's
   deliveries that the stages before it let through. It answers per delivery:
   ``None`` to let it go on, a result that ends the record there (a delay hop,
   a duplicate, a deferral, a dead letter), or :data:`LATER`. The default asks
   ``admit(delivery)`` of each; a stage that talks to AWS overrides it to
   send the batch's requests together.
2. ``admit(delivery)`` again, just before the job would run, for a delivery a
   stage answered :data:`LATER`: that stage's ``admit``, then the ``admit`` of
   each stage after it. So a stage can leave a delivery that depends on an
   earlier job of the batch (the same claim key) until that job has run.
3. ``start(delivery, run)``, in stage order, when every stage admitted the job
   and it is about to run.
4. ``finish(delivery, run)``, in reverse order, when ``run()`` returned or
   raised (``run.error`` holds it: an ``Exception``, or the job's own
   ``SystemExit`` or ``GeneratorExit``, see :data:`JOB_ERRORS`), before the runner decides
   the outcome (retry or dead letter). What must happen however the run
   ends, a stage registers at start with :meth:`Run.when_done`.
5. ``settle(delivery, result)``, in reverse order, for every record, in the
   batch's order, whatever ended it; ``delivery`` is ``None`` for a message that
   never became one (poison, or a bug in jobkit). The result carries the exception.
6. ``end_batch()``, once per SQS batch, in reverse order: a stage that
   finished work in the background waits for it before the stages wired
   before it (metrics) report the batch.

The jobs of a batch run one at a time, in the batch's order (except that the
jobs of one root signature run together, roots first: see
:func:`jobkit.runner.batch.roots_first`): every delivery is admitted (steps 1
and 2) before the first job starts, except those left for later. A type's
``batch_concurrency`` runs some of them side by side, on threads
(:mod:`jobkit.runner.side_by_side`): a stage's ``start``, ``finish`` and
``settle`` may then be called from several threads at once, each for its own
delivery.

Every hook is optional. A hook other than ``admit`` and ``admit_batch`` that
raises is logged and skipped: it never fails the job, the batch, or the other
stages' hooks. Stages keep what they learn about one delivery on the delivery
itself (:meth:`Delivery.note`), never on ``self``; what a stage keeps on
``self`` lasts one batch at most.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from jobkit.core.outcome import RecordResult
    from jobkit.runner.delivery import Delivery

log = logging.getLogger(__name__)

#: What a job's own code may raise and still be a failed attempt, not a dead
#: process: any ``Exception``, and a library's ``sys.exit()`` or a closed
#: generator. ``KeyboardInterrupt`` and other ``BaseException`` subclasses
#: are left to end the invocation.
JOB_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit, GeneratorExit)


class Later(Enum):
    LATER = "later"


#: ``admit_batch``'s answer for a delivery to be admitted on its own turn (step 2).
LATER: Final = Later.LATER


@dataclass
class Run:
    """One attempt's run of a job, as the stages see it."""

    started_at: float
    finished_at: float | None = None
    succeeded: bool = False
    error: BaseException | None = None  # what run() raised
    _when_done: list[Callable[[], object]] = field(default_factory=list, repr=False)

    def when_done(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` as soon as ``run()`` ends, however it ends, even by
        an exception that kills the invocation (which ``finish`` never sees)."""
        self._when_done.append(callback)

    def done(self) -> None:
        """Call every callback, newest first. One that raises is logged and the
        others still run: what a stage does after ``run()`` (close a span,
        cancel an alarm) never changes how the job ended."""
        while self._when_done:
            callback = self._when_done.pop()
            try:
                callback()
            except Exception:
                log.warning("a stage's cleanup after run() failed; the job's outcome stands", exc_info=True)


class Stage:
    """Base class of the runner's stages: every hook does nothing."""

    @classmethod
    def from_kit(cls, kit: Any, parts: Any) -> Stage:
        """The stage, built from the runner's collaborators (a
        :class:`jobkit.runner.stages.StageKit`) and its shared helpers (a
        :class:`jobkit.runner.stages.Parts`): what :data:`jobkit.runner.stages.STAGES` calls."""
        raise NotImplementedError(f"{cls.__name__} is not declared in jobkit.runner.stages.STAGES")

    def begin_batch(self) -> None:
        """An SQS batch begins (the last one may have died mid-way)."""

    def admit_batch(self, deliveries: Sequence[Delivery]) -> Sequence[RecordResult | Later | None]:
        """Before the batch's jobs run: per delivery, ``None``, a result, or :data:`LATER`."""
        return [self.admit(delivery) for delivery in deliveries]

    def admit(self, delivery: Delivery) -> RecordResult | None:
        """Before the job runs: ``None`` to let it go on, or the record's result."""
        return None

    def start(self, delivery: Delivery, run: Run) -> None:
        """The job is about to run."""

    def finish(self, delivery: Delivery, run: Run) -> None:
        """The job's ``run()`` returned or raised."""

    def settle(self, delivery: Delivery | None, result: RecordResult) -> None:
        """The record ended with ``result``."""

    def end_batch(self) -> None:
        """The SQS batch is done."""


def hooks(stages: list[Stage], name: str, *, reverse: bool = False) -> list[Callable[..., Any]]:
    """The ``name`` hooks of the stages that define one, in stage order (or the
    reverse): a stage that keeps the base class's no-op costs nothing per job."""
    found = [getattr(stage, name) for stage in stages if overrides(stage, name)]
    return found[::-1] if reverse else found


def overrides(stage: Stage, hook: str) -> bool:
    """Whether the stage defines ``hook`` (not the base class's no-op)."""
    return getattr(type(stage), hook) is not getattr(Stage, hook)


class Hooks:
    """The stages' hooks, in the order the runner calls them: the defined ones only."""

    def __init__(self, stages: list[Stage]) -> None:
        self.stages = list(stages)  # which stages, in which order, these are the hooks of
        self.begin_batch = hooks(stages, "begin_batch")
        self.admitters = [s for s in stages if overrides(s, "admit") or overrides(s, "admit_batch")]
        self.start = hooks(stages, "start")
        self.finish = hooks(stages, "finish", reverse=True)
        self.settle = hooks(stages, "settle", reverse=True)
        self.end_batch = hooks(stages, "end_batch", reverse=True)
