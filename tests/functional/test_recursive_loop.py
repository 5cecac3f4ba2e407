"""Lambda's recursive loop detection against jobkit's chains, on the local stack.

On AWS a function with ``RecursiveLoop: Terminate`` (Lambda's default) is not
invoked a 17th time in one chain of requests: the message returns to its queue
and reaches the DLQ through the redrive policy, with no reason. jobkit's
chains are loops by design, so its runners are deployed with ``Allow``; the
local stack models the detection (:mod:`jobkit.local.recursion`), so these
tests show both: a stack without ``Allow`` loses the 17th round of a
fan-out and of a delay, and the stack as deployed completes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import chainjobs
import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack
from jobkit.local.recursion import MAX_ROUNDS, lineage_of, with_lineage

from conftest import START

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def declaration() -> Declaration:
    types = {
        "step": {"class": "chainjobs:StepJob", "pushes": ["step"]},
        "later": {"class": "chainjobs:LaterJob"},
    }
    return parse_declaration({"jobkit": {"prefix": "chain", "code_dir": str(FIXTURES)}, "types": types}, source="test")


def running(declaration: Declaration, recursive_loop: str | None) -> Iterator[LocalStack]:
    chainjobs.RUNS.clear()
    with LocalStack(declaration, clock=VirtualClock(START), recursive_loop=recursive_loop) as stack:
        yield stack
    chainjobs.RUNS.clear()


@pytest.fixture
def deployed(declaration: Declaration) -> Iterator[LocalStack]:
    yield from running(declaration, None)  # as the template deploys the runners


@pytest.fixture
def terminating(declaration: Declaration) -> Iterator[LocalStack]:
    yield from running(declaration, "Terminate")  # Lambda's default


def steps_run() -> int:
    return sum(1 for kind, _ in chainjobs.RUNS if kind == "step")


def test_without_allow_a_100_step_fan_out_stops_at_the_16th_round_and_dead_letters_without_a_reason(
    terminating: LocalStack,
) -> None:
    terminating.queue_group("enwiki").push(JobSpecification("step", {"left": 100}))
    terminating.drain()
    assert steps_run() == MAX_ROUNDS
    dead = terminating.dead_letters("step")
    assert len(dead) == 1  # the 17th round, moved by the redrive policy
    assert not any(name.startswith("jobkit.") for name in dead[0].get("MessageAttributes", {}))
    assert terminating.mappings["step"].recursion.dropped == terminating.declaration.queues["step"].max_receive_count


def test_with_allow_a_100_step_fan_out_completes(deployed: LocalStack) -> None:
    deployed.queue_group("enwiki").push(JobSpecification("step", {"left": 100}))
    deployed.drain()
    assert steps_run() == 101
    assert deployed.dead_letters("step") == []
    assert deployed.mappings["step"].recursion.dropped == 0


def test_without_allow_a_six_hour_delay_never_runs(terminating: LocalStack) -> None:
    # 6 h is 24 hops of 900 s: the 17th invocation is stopped (2 h, 8 hops, would pass)
    terminating.queue_group("enwiki").push(JobSpecification("later", {}, delay=6 * 3600))
    terminating.drain()
    assert chainjobs.RUNS == []
    assert len(terminating.dead_letters("later")) == 1


def test_with_allow_a_six_hour_delay_runs_at_its_release(deployed: LocalStack) -> None:
    deployed.queue_group("enwiki").push(JobSpecification("later", {}, delay=6 * 3600))
    deployed.drain()
    assert chainjobs.RUNS == [("later", 0)]
    assert deployed.clock.now() >= START + 6 * 3600


def test_a_fresh_push_starts_a_chain_of_its_own(terminating: LocalStack) -> None:
    # Given a chain that stopped; when the app pushes again (outside any invocation)
    group = terminating.queue_group("enwiki")
    group.push(JobSpecification("step", {"left": 3}))
    terminating.drain()
    # Then its lineage starts at zero: a new chain
    assert steps_run() == 4


def test_lineage_is_kept_per_function_and_raised_never_lowered() -> None:
    header = with_lineage("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1;Lineage=aaaaaaaa:3", {"bbbbbbbb": 1})
    assert header.startswith("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1;")
    assert lineage_of(header) == {"aaaaaaaa": 3, "bbbbbbbb": 1}
    assert lineage_of(with_lineage(header, {"aaaaaaaa": 2})) == {"aaaaaaaa": 3, "bbbbbbbb": 1}
    assert lineage_of("Root=1-x;Lineage=garbage") == {}
