"""The runner's stages are declared (jobkit.runner.stages.STAGES): a runner
builds the ones its queue's types call for, in the declared order; each
stage's declared outcomes are the ones its module ends records with; every
stage class is declared; and the chart in docs/architecture.md is current."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import jobkit.runner.stages as stages_package
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import load_declaration
from jobkit.runner.stage import Stage
from jobkit.runner.stages import CHART_END, CHART_START, STAGES, StageSpec, stage_chart
from jobkit.wiring import AwsClients, Wiring

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
#: What a failed attempt ends as, from whichever stage (jobkit.runner.failures).
FAILED_ATTEMPT = {Outcome.RETRIED, Outcome.DEAD_LETTERED, Outcome.POISONED}


def built(toml: str, queue: str, **runner: object) -> list[str]:
    wiring = Wiring(load_declaration(FIXTURES / toml), clients=AwsClients(region="us-east-1"))
    return [type(stage).__name__ for stage in wiring.runner(queue, **runner).stages]  # type: ignore[arg-type]


def outcomes_named(module: str) -> set[Outcome]:
    """The ``Outcome.X`` members a module's source names."""
    tree = ast.parse(Path(importlib.import_module(module).__file__ or "").read_text())
    return {
        Outcome[node.attr]
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Outcome"
        if node.attr in Outcome.__members__
    }


def helpers_outcomes(module: str) -> set[Outcome]:
    """The outcomes of the runner helpers a stage's module imports (a hold ends a record as ``limited``)."""
    tree = ast.parse(Path(importlib.import_module(module).__file__ or "").read_text())
    found: set[Outcome] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in {"jobkit.runner.hold", "jobkit.runner.requeue"}:
            found |= outcomes_named(node.module)
    return found


def mismatch(spec: StageSpec) -> str | None:
    module = spec.target.partition(":")[0]
    own = outcomes_named(module) - FAILED_ATTEMPT
    undeclared = own - set(spec.ends)
    unfounded = set(spec.ends) - own - helpers_outcomes(module)
    if undeclared or unfounded:
        return f"{spec.name}: names {sorted(undeclared)}, undeclared; declares {sorted(unfounded)}, never ended with"
    return None


@pytest.mark.parametrize("spec", STAGES, ids=[s.name for s in STAGES])
def test_a_stage_declares_the_outcomes_its_module_ends_records_with(spec: StageSpec) -> None:
    assert mismatch(spec) is None


def test_a_wrong_declaration_of_outcomes_is_caught() -> None:
    debounce = next(s for s in STAGES if s.name == "debounce")
    assert "DEBOUNCED" in str(mismatch(dataclasses.replace(debounce, ends=debounce.ends[1:])))
    concurrency = next(s for s in STAGES if s.name == "concurrency")
    assert mismatch(concurrency) is None  # its `limited` comes from the hold it imports
    assert "DEFERRED" in str(mismatch(dataclasses.replace(concurrency, ends=(*concurrency.ends, Outcome.DEFERRED))))


def test_every_stage_class_is_declared_once() -> None:
    declared = [spec.load() for spec in STAGES]
    assert len(set(declared)) == len(declared)
    for info in pkgutil.iter_modules(stages_package.__path__):
        module = importlib.import_module(f"jobkit.runner.stages.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Stage) and cls is not Stage and cls.__module__ == module.__name__:
                assert cls in declared, f"{cls.__name__} is a stage that STAGES does not declare"
                assert "from_kit" in vars(cls), f"{cls.__name__} has no from_kit"


def test_a_runner_builds_the_stages_its_types_call_for_in_the_declared_order() -> None:
    plain = built("jobs.toml", "noop")
    assert plain == [
        "Status",
        "DelayHop",
        "PastLastAttempt",
        "JobInstance",
        "Recount",
        "Dedup",
        "FinalAttempt",
        "Watchdog",
    ]
    debounced = built("flow.toml", "debounced", metrics=object())
    assert debounced[0] == "Metrics" and "DebounceStage" in debounced
    assert "Concurrency" not in debounced and "RateLimited" not in debounced
    assert debounced.index("DebounceStage") < debounced.index("Recount") < debounced.index("Dedup")
    everything = built("flow.toml", "everything")
    order = [spec.load().__name__ for spec in STAGES]
    assert everything == [name for name in order if name in everything]
    assert {"DebounceStage", "Concurrency", "RateLimited"} <= set(everything)


def test_a_runner_without_flow_control_never_imports_those_stages() -> None:
    script = (
        "import sys\n"
        "from jobkit.declaration.config import load_declaration\n"
        "from jobkit.wiring import AwsClients, Wiring\n"
        f"w = Wiring(load_declaration({str(FIXTURES / 'jobs.toml')!r}), clients=AwsClients(region='us-east-1'))\n"
        "w.runner('noop')\n"
        "print(sorted(m for m in sys.modules if m.startswith('jobkit.runner.stages.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    for name in ("debounce", "concurrency", "rate_limit", "trace", "cancel"):
        assert f"jobkit.runner.stages.{name}'" not in out
    assert "jobkit.runner.stages.dedup'" in out


def test_the_stage_chart_in_the_docs_is_current() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert CHART_START + "\n" + stage_chart() + CHART_END in text, "run `make reference`"
