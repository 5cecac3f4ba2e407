"""``jobkit demo --scenario flow-control``: fairness, a rate limit and a
debounce, measured on the local stack.

Its declaration is ``flow_demo.toml`` beside this module; the job classes,
stand-ins that do nothing, are resolved from it (:mod:`jobkit.local.flow_demo_jobs`).
Each part runs on its own embedded AWS, on a frozen virtual clock, with the
parallel fleet (``drain(parallel=True)``), so pickup delays and start times
are those of a fleet of containers with each queue's ``max_concurrency``:

- **fairness**: a noisy wiki pushes 10,000 ``renderPage`` jobs; the fleet has
  been at them for :data:`HEAD_START_S` when a quiet wiki pushes 100. Run
  twice, with the declared ``fairness = "domain"`` and with ``fairness =
  false``: the quiet wiki's 95th-percentile pickup delay in each run.
- **rate limit**: 60 ``callPartnerApi`` jobs for one account, limited to 5 a
  second: the rate at which they actually started, from their start times.
- **debounce**: five pages edited ten times each within a few seconds: how
  many ``reindexPage`` jobs were pushed, ran, and were debounced.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, load_declaration
from jobkit.local.stack import LocalStack

#: The scenario's declaration, in the package.
DECLARATION = Path(__file__).with_name("flow_demo.toml")

FAIR_TYPE = "renderPage"
RATE_TYPE = "callPartnerApi"
DEBOUNCE_TYPE = "reindexPage"
NOISY_DOMAIN = "noisywiki"
QUIET_DOMAIN = "quietwiki"
ACCOUNT = "acme"

#: How long (virtual seconds) the fleet works at the noisy backlog before the quiet jobs come.
HEAD_START_S = 0.2
#: The debounced pages' edits: one edit of each page every so many virtual seconds.
EDIT_GAP_S = 0.3

START = 1_800_000_000.0


@dataclass(frozen=True)
class FlowDemoReport:
    """What the scenario measured."""

    quiet_p95_ms: float
    quiet_p95_without_fairness_ms: float
    rate_key: str
    observed_per_s: float
    limit_per_s: float
    debounce_pushed: int
    debounce_ran: int
    debounced: int
    wall_s: float

    @property
    def fairness_gain(self) -> float:
        """How many times lower the quiet wiki's p95 pickup is with fairness."""
        return self.quiet_p95_without_fairness_ms / max(self.quiet_p95_ms, 1e-9)

    def lines(self) -> list[str]:
        return [
            f"fairness: quiet domain p95 pickup {self.quiet_p95_ms:.0f} ms"
            f" (without fairness: {self.quiet_p95_without_fairness_ms:.0f} ms)",
            f"rate limit: {self.observed_per_s:.1f} jobs/s observed for key {self.rate_key}"
            f" (limit {self.limit_per_s:g})",
            f"debounce: {self.debounce_pushed} pushed, {self.debounce_ran} ran, {self.debounced} debounced",
        ]


def run_flow_demo(
    *,
    noisy: int = 10_000,
    quiet: int = 100,
    rate_jobs: int = 60,
    pages: int = 5,
    edits: int = 10,
    seed: int = 7,
    on_progress: Callable[[int], None] | None = None,
) -> FlowDemoReport:
    """Run the three parts and measure them (sizes as in the module's docstring by default)."""
    started = time.perf_counter()
    declaration = load_declaration(DECLARATION)
    fair = quiet_pickups(declaration, noisy=noisy, quiet=quiet, seed=seed, on_progress=on_progress)
    unfair = quiet_pickups(
        without_fairness(declaration, FAIR_TYPE), noisy=noisy, quiet=quiet, seed=seed, on_progress=on_progress
    )
    rate_limit = declaration.job_type(RATE_TYPE).rate_limit
    if rate_limit is None:
        raise RuntimeError(f"{DECLARATION.name} declares no rate limit for {RATE_TYPE}")
    with _stack(declaration, seed) as stack:
        rate_ids = stack.queue_group().push(
            [JobSpecification(RATE_TYPE, {"account": ACCOUNT, "call": n}) for n in range(rate_jobs)]
        )
        edit_ids = _edit_pages(stack, pages=pages, edits=edits, on_progress=on_progress)
        stack.drain(parallel=True, on_poll=on_progress)
        results = stack.results.results
    spec = JobSpecification(RATE_TYPE, {"account": ACCOUNT})
    final = _final_outcomes(results, set(edit_ids))
    return FlowDemoReport(
        quiet_p95_ms=p95(fair),
        quiet_p95_without_fairness_ms=p95(unfair),
        rate_key=rate_limit.key.shown(rate_limit.key.value(spec)),
        observed_per_s=observed_rate(_start_times(results, set(rate_ids))),
        limit_per_s=rate_limit.per_second,
        debounce_pushed=len(edit_ids),
        debounce_ran=sum(1 for outcome in final.values() if outcome is Outcome.SUCCEEDED),
        debounced=sum(1 for outcome in final.values() if outcome is Outcome.DEBOUNCED),
        wall_s=time.perf_counter() - started,
    )


def quiet_pickups(
    declaration: Declaration,
    *,
    noisy: int,
    quiet: int,
    seed: int = 7,
    on_progress: Callable[[int], None] | None = None,
) -> list[float]:
    """The quiet wiki's pickup delays (ms): its jobs are pushed once the fleet
    has worked at the noisy wiki's backlog for :data:`HEAD_START_S`."""
    with _stack(declaration, seed) as stack:
        stack.queue_group(NOISY_DOMAIN).push([JobSpecification(FAIR_TYPE, {"page": n}) for n in range(noisy)])
        stack.drain(until=stack.clock.now() + HEAD_START_S, parallel=True, on_poll=on_progress)
        quiet_ids = set(
            stack.queue_group(QUIET_DOMAIN).push([JobSpecification(FAIR_TYPE, {"page": n}) for n in range(quiet)])
        )
        stack.drain(parallel=True, on_poll=on_progress)
        return [
            r.pickup_delay_ms
            for r in stack.results.results
            if r.job_id in quiet_ids and r.attempt == 1 and r.pickup_delay_ms is not None
        ]


def without_fairness(declaration: Declaration, job_type: str) -> Declaration:
    """The declaration with ``fairness = false`` for one type."""
    types = dict(declaration.types)
    types[job_type] = dataclasses.replace(types[job_type], fairness=None)
    return dataclasses.replace(declaration, types=types)


def observed_rate(starts: Sequence[float]) -> float:
    """Jobs started per second over a key's busy period, from the first start
    to the last: the starts after the first, over the time they took."""
    if len(starts) < 2:
        return 0.0
    ordered = sorted(starts)
    span = ordered[-1] - ordered[0]
    return (len(ordered) - 1) / span if span > 0 else float("inf")


def _stack(declaration: Declaration, seed: int) -> LocalStack:
    return LocalStack(declaration, clock=VirtualClock(START), seed=seed)


def _edit_pages(stack: LocalStack, *, pages: int, edits: int, on_progress: Callable[[int], None] | None) -> list[str]:
    """Each page edited ``edits`` times, one edit of each every :data:`EDIT_GAP_S`; the jobs' IDs."""
    group = stack.queue_group("enwiki")
    ids: list[str] = []
    for edit in range(edits):
        ids += group.push([JobSpecification(DEBOUNCE_TYPE, {"page": f"Page {p}", "edit": edit}) for p in range(pages)])
        stack.drain(until=stack.clock.now() + EDIT_GAP_S, parallel=True, on_poll=on_progress)
    return ids


def _start_times(results: Sequence[RecordResult], job_ids: set[str]) -> list[float]:
    return [r.started_at for r in results if r.job_id in job_ids and r.ran and r.started_at is not None]


def _final_outcomes(results: Sequence[RecordResult], job_ids: set[str]) -> dict[str, Outcome]:
    final: dict[str, Outcome] = {}
    for r in results:
        if r.job_id in job_ids and r.outcome.is_final and final.get(r.job_id) is not Outcome.SUCCEEDED:
            final[r.job_id] = r.outcome
    return final


def p95(values: Sequence[float]) -> float:
    """The 95th percentile of the pickup delays a scenario measured."""
    if not values:
        raise RuntimeError("none of the jobs measured ran: the scenario did not finish")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[94]
