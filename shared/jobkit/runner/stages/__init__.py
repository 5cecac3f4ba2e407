"""The runner's stages, declared: which runners want each, how it is built,
its order, and the outcomes it can end a record with.

Adding a behaviour to the runner is one new module here (a :class:`Stage`
with a ``from_kit`` constructor) and one :class:`StageSpec` in :data:`STAGES`,
at its place in the order. A stage's module is imported only by a runner that
wants it, so a cold start pays for the stages its types use. The stage chart
in docs/architecture.md is drawn from :data:`STAGES` (:func:`stage_chart`,
``make reference``). See :mod:`jobkit.runner.stage` for the hooks.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import JobType, QueueConfig
from jobkit.dedup.store import DedupStore
from jobkit.records.journal import AttemptJournal
from jobkit.runner.attempts import Attempts
from jobkit.runner.delivery import MetricsPort, QueuePort
from jobkit.runner.failures import Failures
from jobkit.runner.hold import Hold
from jobkit.runner.requeue import Requeue
from jobkit.runner.stage import Stage

if TYPE_CHECKING:
    from jobkit.jobs.job import QueueGroup
    from jobkit.payloads.store import PayloadStore
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
    payloads: PayloadStore | None = None  # the payload bucket, where large jobs' params are

    @property
    def has_table(self) -> bool:
        return self.records is not None and self.dedup is not None and self.journal is not None

    @property
    def table(self) -> TableKit:
        """The jobs table's three doors, for a stage whose spec wants the table."""
        if self.records is None or self.dedup is None or self.journal is None:
            raise TypeError("this stage needs the jobs table: its spec must want it (WITH_TABLE)")
        return TableKit(self.records, self.dedup, self.journal)

    @property
    def metrics_port(self) -> MetricsPort:
        if self.metrics is None:
            raise TypeError("the metrics stage needs a metrics port: its spec must want it (WITH_METRICS)")
        return self.metrics

    def any_type(self, option: str) -> bool:
        """Whether one of the queue's types sets ``option`` (not None, not false)."""
        return any(getattr(t, option) is not None and getattr(t, option) is not False for t in self.job_types)


@dataclass(frozen=True)
class TableKit:
    records: Records
    dedup: DedupStore
    journal: AttemptJournal


class Parts:
    """The runner's shared helpers that several stages hold: one of each per runner."""

    def __init__(self, kit: StageKit, failures: Failures) -> None:
        self.failures = failures
        self.requeue = Requeue(kit.queues, kit.journal, failures)
        self.attempts = Attempts(kit.journal)
        self.hold = Hold(kit.clock, self.requeue, failures)


@dataclass(frozen=True)
class When:
    """Which runners want a stage: a test of the kit, and what it says in words."""

    says: str
    wants: Callable[[StageKit], bool]


ALWAYS = When("always", lambda kit: True)
WITH_METRICS = When("metrics are reported", lambda kit: kit.metrics is not None)
WITH_TABLE = When("the runner has the jobs table", lambda kit: kit.has_table)
WITH_PAYLOADS = When("the runner has the payload bucket", lambda kit: kit.payloads is not None)


def table_and_option(option: str) -> When:
    return When(f"the jobs table, and a type with `{option}`", lambda kit: kit.has_table and kit.any_type(option))


def option(name: str) -> When:
    return When(f"a type with `{name}`", lambda kit: kit.any_type(name))


@dataclass(frozen=True)
class StageSpec:
    """One stage, declared.

    Args:
        name: how the chart names it.
        target: ``module:Class``; the module is imported only when a runner wants it.
        when: which runners want it.
        does: what it does, in a line, for the chart.
        ends: the outcomes it can end a record with itself (a failed attempt
            adds ``retried`` and ``dead_lettered``); a test reads them off its module.
    """

    name: str
    target: str
    when: When
    does: str
    ends: tuple[Outcome, ...] = ()

    def load(self) -> type[Stage]:
        module, _, attribute = self.target.partition(":")
        cls: type[Stage] = getattr(importlib.import_module(module), attribute)
        return cls


_M = "jobkit.runner.stages."

#: The stages, in the order they admit a job (and the reverse of the order they settle it).
STAGES: tuple[StageSpec, ...] = (
    StageSpec(
        "metrics",
        _M + "metrics:Metrics",
        WITH_METRICS,
        "first to admit, so last to settle: reports every record's final result",
    ),
    # Status before cancellation, which ends a tracked job's status as cancelled
    StageSpec("status", _M + "status:Status", ALWAYS, "a `track_status` job's status record, from its outcome"),
    StageSpec(
        "large params done",
        _M + "payload_done:PayloadDone",
        WITH_PAYLOADS,
        "marks a large job that ended (not dead-lettered) as ended beside its params object, and removes the object",
    ),
    # A batch counts its members' ends late: after every stage that can end a record.
    StageSpec(
        "batch",
        _M + "batch:BatchSettle",
        table_and_option("batches"),
        "counts a batch member's end once, and pushes the batch's callbacks when every member has ended;"
        " answers a batch's check",
        (Outcome.SUCCEEDED,),
    ),
    # Cancellation before the delay hop: a delayed job is dropped at its next hop.
    StageSpec(
        "cancel",
        _M + "cancel:Cancel",
        table_and_option("cancellable"),
        "a job a cancellation covers is acknowledged without running (a copy of a push that ran to success:"
        " redelivered); a running job can check `self.cancelled()`",
        (Outcome.CANCELLED, Outcome.REDELIVERED),
    ),
    StageSpec(
        "delay hop",
        _M + "release:DelayHop",
        ALWAYS,
        "a job whose release time is ahead goes back with a new delay",
        (Outcome.DELAYED,),
    ),
    StageSpec(
        "past last attempt",
        _M + "last_attempt:PastLastAttempt",
        ALWAYS,
        "a receive after the last attempt: acknowledged if it succeeded, else dead-lettered with its reason",
        (Outcome.REDELIVERED,),
    ),
    StageSpec(
        "job instance",
        _M + "job_instance:JobInstance",
        ALWAYS,
        "builds the job from its declared class; a constructor that raises is a failed attempt",
    ),
    # Flow control before de-duplication: a job that debounce skips, or a limit holds
    # back, has taken no claim and advanced no root that would skip others.
    StageSpec(
        "debounce",
        _M + "debounce:DebounceStage",
        table_and_option("debounce"),
        "one run per window of a debounce key: the latest job pushed in it",
        (Outcome.DEBOUNCED, Outcome.DELAYED, Outcome.SUPERSEDED, Outcome.DUPLICATE, Outcome.REDELIVERED),
    ),
    StageSpec(
        "concurrency",
        _M + "concurrency:Concurrency",
        table_and_option("concurrency"),
        "a lease per key for the batch; a full key holds its jobs back",
        (Outcome.LIMITED,),
    ),
    StageSpec(
        "rate limit",
        _M + "rate_limit:RateLimited",
        table_and_option("rate_limit"),
        "a token per job from its key's bucket; an empty bucket holds the job back",
        (Outcome.LIMITED,),
    ),
    # After flow control (a recounted copy keeps the debounce window its job holds,
    # and gives back its lease), before de-duplication: a recounted job claims nothing.
    StageSpec(
        "recount",
        _M + "recount:Recount",
        WITH_TABLE,
        "at a last attempt, counts the attempts that ran; fewer than SQS counted: sent again at once",
        (Outcome.DEFERRED,),
    ),
    StageSpec(
        "dedup",
        _M + "dedup:Dedup",
        WITH_TABLE,
        "root supersession, duplicate and delivery claims; a claim held by a running job defers",
        (Outcome.SUPERSEDED, Outcome.DUPLICATE, Outcome.REDELIVERED, Outcome.DEFERRED),
    ),
    StageSpec(
        "final attempt",
        _M + "final_attempt:FinalAttempt",
        ALWAYS,
        "a record when a type's last attempt starts and when it succeeds, so a later receive knows how it ended",
    ),
    StageSpec(
        "watchdog",
        _M + "watchdog:Watchdog",
        ALWAYS,
        "an alarm before the function's deadline: a job still running then leaves a failure record",
    ),
    StageSpec("trace", _M + "trace:Trace", option("tracing"), "last to start: its span holds the job's `run()` only"),
)


def standard_stages(kit: StageKit, failures: Failures, specs: tuple[StageSpec, ...] = STAGES) -> list[Stage]:
    """The stages a runner wants, built, in the order of ``specs``."""
    parts = Parts(kit, failures)
    return [spec.load().from_kit(kit, parts) for spec in specs if spec.when.wants(kit)]


CHART_START, CHART_END = "<!-- stages: drawn from jobkit.runner.stages.STAGES by make reference -->", "<!-- /stages -->"


def stage_chart(specs: tuple[StageSpec, ...] = STAGES) -> str:
    """The stage chart of docs/architecture.md: a Markdown table, one row per stage."""
    rows = ["| # | stage | wired when | what it does | ends a record as |", "|---|---|---|---|---|"]
    for number, spec in enumerate(specs, 1):
        ends = ", ".join(f"`{o.value}`" for o in spec.ends) or "-"
        where = spec.target.removeprefix(_M).replace(":", ".")
        rows.append(f"| {number} | {spec.name} (`{where}`) | {spec.when.says} | {spec.does} | {ends} |")
    return "\n".join(rows) + "\n"


def write_stage_chart(path: str) -> None:
    """Rewrite the stage chart between the markers of the Markdown file at ``path``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, found, rest = text.partition(CHART_START + "\n")
    _, ended, tail = rest.partition(CHART_END)
    if not found or not ended:
        raise ValueError(f"{path}: no stage chart between {CHART_START} and {CHART_END}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + CHART_START + "\n" + stage_chart() + CHART_END + tail)
