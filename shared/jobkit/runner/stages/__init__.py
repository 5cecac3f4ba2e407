"""The runner's stages, and the order they are wired in.

Adding a behaviour to the runner is one new module here and one line in
:func:`standard_stages`. See :mod:`jobkit.runner.stage` for the hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.clock import Clock
from jobkit.config import JobType, QueueConfig
from jobkit.dedup.store import DedupStore
from jobkit.journal import AttemptJournal
from jobkit.runner.attempts import Attempts
from jobkit.runner.delivery import MetricsPort, QueuePort
from jobkit.runner.failures import Failures
from jobkit.runner.hold import Hold
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Stage
from jobkit.runner.stages.dedup import Dedup
from jobkit.runner.stages.final_attempt import FinalAttempt
from jobkit.runner.stages.job_instance import JobInstance
from jobkit.runner.stages.last_attempt import PastLastAttempt
from jobkit.runner.stages.metrics import Metrics
from jobkit.runner.stages.recount import Recount
from jobkit.runner.stages.release import DelayHop
from jobkit.runner.stages.status import Status
from jobkit.runner.stages.watchdog import DeadlineWatchdog, Watchdog

if TYPE_CHECKING:
    from jobkit.job import QueueGroup
    from jobkit.records.store import Records


@dataclass(frozen=True)
class StageKit:
    """What the stages are built from: the runner's collaborators. Without
    ``records`` (the jobs table), jobs run without de-duplication, flow
    control or status, and no record is written."""

    queue: QueueConfig
    queues: QueuePort
    clock: Clock
    records: Records | None = None
    dedup: DedupStore | None = None
    journal: AttemptJournal | None = None
    metrics: MetricsPort | None = None
    group_factory: Callable[[str | None], QueueGroup] | None = None
    job_types: tuple[JobType, ...] = ()  # the queue's types, for the stages their options call for


def standard_stages(kit: StageKit, failures: Failures) -> list[Stage]:
    """The stages of a runner, in the order they admit a job (and the reverse
    of the order they settle it)."""
    requeue = Requeue(kit.queues, kit.journal, failures)
    attempts = Attempts(kit.journal)
    stages: list[Stage] = []
    if kit.metrics is not None:
        stages.append(Metrics(kit.metrics))  # first to admit, so the last to settle: it sees the final result
    stages += [
        DelayHop(kit.clock, requeue),
        PastLastAttempt(attempts, failures),
        Status(kit.records, kit.clock),
        JobInstance(failures, kit.group_factory),
    ]
    hold = Hold(kit.clock, requeue, failures)
    if kit.records is not None and kit.dedup is not None and kit.journal is not None:
        # Flow control before de-duplication: a job that debounce skips, or a limit
        # holds back, has taken no claim and advanced no root that would skip others.
        # (imported only by a runner whose types declare them: a cold start pays for what it uses)
        records, parallel = kit.records, kit.dedup.parallel
        if any(t.debounce is not None for t in kit.job_types):
            from jobkit.runner.stages.debounce import DebounceStage

            stages.append(
                DebounceStage(
                    records.debounce_windows,
                    kit.clock,
                    requeue,
                    hold,
                    parallel,
                    kit.dedup.superseded,
                    kit.dedup.already_delivered,
                )
            )
        if any(t.concurrency is not None for t in kit.job_types):
            from jobkit.runner.stages.concurrency import Concurrency

            stages.append(Concurrency(records.leases, kit.clock, hold, parallel))
        if any(t.rate_limit is not None for t in kit.job_types):
            from jobkit.runner.stages.rate_limit import RateLimited

            stages.append(RateLimited(records.token_buckets, kit.clock, hold, parallel))
        # After flow control (a recounted copy keeps the debounce window its job holds, and
        # gives back its lease), before de-duplication: a recounted job claims nothing
        stages.append(Recount(kit.journal, requeue))
        stages.append(Dedup(kit.dedup, kit.clock, requeue, failures))
    record_failure = kit.journal.record_failure if kit.journal is not None else _no_record
    stages += [
        FinalAttempt(attempts),
        Watchdog(DeadlineWatchdog(kit.clock, record_failure), kit.queue.timeout_s),
    ]
    if any(t.tracing for t in kit.job_types):  # last to start: its span holds run() only
        from jobkit.runner.stages.trace import Trace

        stages.append(Trace([t.name for t in kit.job_types if t.tracing]))
    return stages


def _no_record(_: object) -> None:
    """Without a records store, the watchdog only logs."""
