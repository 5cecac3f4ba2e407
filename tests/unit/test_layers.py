"""The package's layers, as docs/architecture.md writes them down, hold in the code.

Every import of every module of ``shared/jobkit`` is read (at module level,
inside functions and under ``TYPE_CHECKING`` alike) and checked against the
layer table in docs/architecture.md: none points up a layer, no modules import
each other in a circle, the packages of one layer form no circle either, every
module is placed, and none is over 400 lines.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "jobkit"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 400


@dataclass(frozen=True)
class Layer:
    rank: int
    name: str
    prefixes: tuple[str, ...]


def read_layers(text: str) -> list[Layer]:
    """The rows between the ``layers`` markers: ``| 3 records | ... | `jobkit.x`, ... |``."""
    block = text.split("<!-- layers:", 1)[1].split("<!-- /layers -->", 1)[0]
    layers = []
    for row in block.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        head = re.fullmatch(r"(\d+) (.+)", cells[0]) if len(cells) == 3 else None
        if head:
            prefixes = tuple(re.findall(r"`(jobkit[\w.]*)`", cells[2]))
            layers.append(Layer(int(head.group(1)), head.group(2), prefixes))
    assert [layer.rank for layer in layers] == list(range(1, len(layers) + 1)), "layers numbered from 1, bottom up"
    return layers


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """The jobkit modules ``name`` imports anywhere in its source."""
    known = set(known)
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join(here + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("jobkit") and target != name:
                found.add(target)
    return found


def layer_of(name: str, layers: list[Layer]) -> Layer | None:
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for prefix in layer.prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), layer)
    return best[1] if best else None


def unit_of(name: str, layers: list[Layer]) -> str:
    """The package (or top-level module) a module belongs to, within its layer."""
    layer = layer_of(name, layers)
    assert layer is not None
    prefix = max((p for p in layer.prefixes if name == p or name.startswith(p + ".")), key=len)
    return prefix


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def layers() -> list[Layer]:
    return read_layers(ARCHITECTURE.read_text())


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, found) for name, path in found.items()}


def test_every_module_has_a_layer(layers: list[Layer], graph: dict[str, set[str]]) -> None:
    assert [name for name in graph if layer_of(name, layers) is None] == []


def test_no_import_points_up_a_layer(layers: list[Layer], graph: dict[str, set[str]]) -> None:
    upward = []
    for name, targets in sorted(graph.items()):
        here = layer_of(name, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here and there and there.rank > here.rank:
                upward.append(f"{name} ({here.rank} {here.name}) imports {target} ({there.rank} {there.name})")
    assert upward == []


def test_no_modules_import_each_other_in_a_circle(graph: dict[str, set[str]]) -> None:
    assert circles(graph) == []


def test_the_packages_of_a_layer_import_each_other_in_no_circle(
    layers: list[Layer], graph: dict[str, set[str]]
) -> None:
    units: dict[str, set[str]] = {}
    for name, targets in graph.items():
        here = layer_of(name, layers)
        for target in targets:
            if layer_of(target, layers) == here and unit_of(name, layers) != unit_of(target, layers):
                units.setdefault(unit_of(name, layers), set()).add(unit_of(target, layers))
    assert circles(units) == []


def test_no_module_is_over_400_lines() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


# -- the checks can fail ------------------------------------------------------------------------------


def test_an_upward_import_inside_a_function_is_caught(tmp_path: Path, layers: list[Layer]) -> None:
    # Given the real package, with one core module that imports the runner
    # inside a function (as a lazy import would)
    package = tmp_path / "jobkit"
    for path in modules().values():
        copy = tmp_path / path.relative_to(PACKAGE.parent)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text())
    spec = package / "core" / "spec.py"
    spec.write_text(spec.read_text() + "\n\ndef _late():\n    from jobkit.runner.loop import Runner\n")
    # When the graph is read again
    found = modules(package)
    graph = {name: imports(name, path, found) for name, path in found.items()}
    # Then the import points up from core to the runner, and it closes a circle
    assert "jobkit.runner.loop" in graph["jobkit.core.spec"]
    assert layer_of("jobkit.runner.loop", layers).rank > layer_of("jobkit.core.spec", layers).rank  # type: ignore[union-attr]
    assert any("jobkit.core.spec" in circle for circle in circles(graph))


def test_the_table_is_read_as_written() -> None:
    text = "<!-- layers: x -->\n| layer | what | modules |\n|---|---|---|\n| 1 low | a | `jobkit.a`, `jobkit.b.c` |\n"
    text += "| 2 high | b | `jobkit.b` |\n<!-- /layers -->"
    low, high = read_layers(text)
    assert (low.name, low.prefixes, high.prefixes) == ("low", ("jobkit.a", "jobkit.b.c"), ("jobkit.b",))
    assert layer_of("jobkit.b.c.d", [low, high]) == low and layer_of("jobkit.b.e", [low, high]) == high
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
