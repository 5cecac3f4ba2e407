"""benchmarks/soak.py at a tiny size: it runs, injects faults, and balances."""

from __future__ import annotations

import importlib.util
import sys
import time
from types import ModuleType

from conftest import ROOT


def load_soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak", ROOT / "benchmarks" / "soak.py")
    assert spec and spec.loader
    module = sys.modules.setdefault("soak", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


def test_a_small_soak_in_bad_weather_balances() -> None:
    soak = load_soak()
    began = time.perf_counter()
    result = soak.run(300, 0.05, seed=1)
    assert time.perf_counter() - began < 10
    print("\n" + soak.report(result))
    assert result.pushed >= 300 and result.accepted_entries >= result.pushed
    assert sum(result.faults_injected.values()) > 0
    assert result.succeeded and result.duplicate and result.superseded and result.dead_lettered
    assert result.lost == 0 and result.dead_letters_unexplained == 0 and result.queues_empty
    assert result.pushed == result.succeeded + result.duplicate + result.superseded + result.dead_lettered
    assert result.balanced


def test_the_soak_exits_non_zero_when_the_books_do_not_balance() -> None:
    soak = load_soak()
    result = soak.SoakResult(
        jobs=1, fault_rate=0.0, seed=1, pushed=3, succeeded=2, queues_empty=True, accepted_entries=3
    )
    assert not result.balanced  # one job unaccounted for
    result.dead_lettered = 1
    assert result.balanced
    result.lost = 1
    assert not result.balanced
