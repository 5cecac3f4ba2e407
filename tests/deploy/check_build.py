"""Checks what `sam build` built from a jobkit template: ``python check_build.py BUILD_DIR``.

Run it with the Python whose jobkit built the stack. The layer must hold that
jobkit, at its installed version, with Powertools and without the runtime's own
boto3/botocore; each runner must hold the app's job package and no jobkit; both
carry unchecked hash-based bytecode for the runtime's Python, when the build
machine has that Python.
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from pathlib import Path


def main(build_dir: Path) -> list[str]:
    problems: list[str] = []
    layer = build_dir / "JobkitLayer" / "python"
    init = layer / "jobkit" / "__init__.py"
    installed = importlib.metadata.version("jobkit-aws")
    if not init.is_file():
        return [f"{init} missing"]
    built = _version(init)
    if built != installed:
        problems.append(f"layer has jobkit {built}, but {installed} is installed")
    if not (layer / f"jobkit_aws-{installed}.dist-info" / "METADATA").is_file():
        problems.append("layer lacks jobkit-aws's distribution metadata")
    if not (layer / "aws_lambda_powertools" / "__init__.py").is_file():
        problems.append("layer lacks aws_lambda_powertools")
    for provided in ("boto3", "botocore"):
        if (layer / provided).exists():
            problems.append(f"layer carries {provided}, which the Lambda runtime provides")
    problems += _bytecode(layer, "layer")
    runners = [d for d in build_dir.iterdir() if d.is_dir() and d.name.endswith("Runner")]
    if not runners:
        problems.append("no runner functions were built")
    for runner in runners:
        if (runner / "jobkit").exists():
            problems.append(f"{runner.name} carries its own jobkit (it must come from the layer)")
        if not any(runner.rglob("*.py")):
            problems.append(f"{runner.name} has no job code")
        problems += _bytecode(runner, runner.name)
    return problems


def _bytecode(root: Path, what: str) -> list[str]:
    """Every module has unchecked hash-based bytecode for the runtime's Python (when
    the build had that Python), and none for any other."""
    from jobkit.sam.bytecode import bytecode_tag, usable_runtime_python, without_bytecode

    tag = bytecode_tag()
    pycs = list(root.rglob("*.pyc"))
    problems = [f"{what} carries bytecode for another Python: {p}" for p in pycs if tag not in p.name][:3]
    if usable_runtime_python() is None:
        return problems  # the build said it ships none: the machine has no Python of the runtime's version
    missing = without_bytecode(root)
    if missing:
        problems.append(f"{what}: {len(missing)} modules lack {tag} bytecode, e.g. {missing[0]}")
    flags = {int.from_bytes(p.read_bytes()[4:8], "little") for p in pycs}
    if flags - {1}:  # bit 0: hash-based; bit 1: checked against the source
        problems.append(f"{what}: bytecode that is not unchecked hash-based (pyc flags {sorted(flags)})")
    return problems


def _version(init: Path) -> str:
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__version__" for t in node.targets):
            return str(ast.literal_eval(node.value))
    return "?"


if __name__ == "__main__":
    found = main(Path(sys.argv[1]))
    for problem in found:
        print(f"check_build: {problem}", file=sys.stderr)
    if found:
        sys.exit(1)
    print(f"check_build: layer holds jobkit {importlib.metadata.version('jobkit-aws')}; runners hold the job code")
