"""Every measured figure the README and the docs quote outside the benchmark
table is the one the current results render (benchmarks/figures.py): a
figure from an older run cannot stay behind."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def latest() -> dict[str, object]:
    results: dict[str, object] = json.loads((ROOT / "benchmarks" / "results" / "latest.json").read_text())
    return results


def test_every_quoted_figure_is_what_the_current_results_render() -> None:
    assert figures().stale(ROOT, latest()) == [], "run `python benchmarks/figures.py` (or `make bench`)"


def test_the_benchmark_table_is_the_current_results_too() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from run import END, START, render
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    readme = (ROOT / "README.md").read_text()
    assert f"{START}\n{render(latest())}\n{END}" in readme, "run `make bench`"


def test_a_figure_from_an_older_run_is_caught(tmp_path: Path) -> None:
    module = figures()
    for path in {path for path, _ in module.REGIONS}:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    results = latest()
    module.rewrite(tmp_path, results)
    assert module.stale(tmp_path, results) == []
    older = json.loads(json.dumps(results))
    older["soak"]["pushed"] += 1  # type: ignore[index]
    assert module.stale(tmp_path, older) == ["README.md figures:soak", "docs/reliability.md figures:soak"]
