"""Bytecode for the Lambda runtime, in what ``sam build`` ships.

Lambda runs a function's code and its layers from read-only directories, so
Python can write no bytecode cache there: code shipped without bytecode is
compiled again on every cold start, jobkit, its dependencies and the app's
jobs alike. The build compiles what it ships, with the runtime's own Python
(bytecode is specific to a Python version: the runtime's, which template.yaml
names, ignores any other's), into hash-based pycs: a timestamp-based pyc goes
stale when packaging rewrites the files' times (a zip keeps them to two
seconds). They are unchecked: Python trusts them without reading the source,
since a built artifact is never edited, only built again.

The runtime's Python is ``$JOBKIT_RUNTIME_PYTHON``, else ``python3.12`` (the
runtime's name) on the PATH, a pyenv install of 3.12, or the Python running the
build, whichever is first to run as Python 3.12. Without one, the build still succeeds, and says what the cold starts
will pay and how to fix it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from jobkit.core.resources import RUNTIME

#: Names an interpreter of the runtime's Python version for the build.
RUNTIME_PYTHON_VARIABLE = "JOBKIT_RUNTIME_PYTHON"


def runtime_python(runtime: str = RUNTIME, environ: Mapping[str, str] | None = None) -> str | None:
    """A Python interpreter of the runtime's version, or ``None``: the one
    ``$JOBKIT_RUNTIME_PYTHON`` names (as named: a wrong one is reported, not
    passed over), else the first that runs and is that version of ``python3.12``
    on the PATH (a pyenv shim of a version not activated does not run), a pyenv
    install of a release of it (the newest), and the Python running the build."""
    environ = os.environ if environ is None else environ
    named = environ.get(RUNTIME_PYTHON_VARIABLE)
    if named:
        return named
    version = runtime.removeprefix("python")
    pyenv = Path(environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    releases = [
        p for p in pyenv.glob(f"{version}.*/bin/{runtime}") if p.parts[-3].removeprefix(f"{version}.").isdigit()
    ]
    releases.sort(key=lambda p: int(p.parts[-3].rsplit(".", 1)[1]), reverse=True)  # no alpha: its bytecode differs
    for candidate in [shutil.which(runtime), *map(str, releases), sys.executable]:
        if candidate and _version_of(candidate) == version:
            return candidate
    return None


def usable_runtime_python(runtime: str = RUNTIME) -> str | None:
    """:func:`runtime_python`, if it runs as CPython of the runtime's version."""
    python = runtime_python(runtime)
    return python if python is not None and _version_of(python) == runtime.removeprefix("python") else None


def compile_for_runtime(root: Path, runtime: str = RUNTIME, python: str | None = None) -> str | None:
    """Compile every ``.py`` under ``root`` into unchecked hash-based pycs for
    ``runtime``, beside the sources. Returns ``None``, or what went wrong and what
    to do (the build goes on: code without bytecode runs, only its cold starts
    are slower), naming the modules left without bytecode."""
    python = python or runtime_python(runtime)
    if python is None:
        return (
            f"no {runtime} here to compile bytecode with: the code ships without it, and every cold start "
            f"compiles it again. Install Python {runtime.removeprefix('python')} (or set "
            f"{RUNTIME_PYTHON_VARIABLE}=/path/to/{runtime}) and run sam build again"
        )
    version, wanted = _version_of(python), runtime.removeprefix("python")
    if version != wanted:
        found = f"Python {version}" if version is not None else "not a Python that runs"
        return (
            f"{python} is {found}, not {wanted}: the code ships without bytecode. Point "
            f"{RUNTIME_PYTHON_VARIABLE} at a Python {wanted} and run sam build again"
        )
    command = [python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", str(root)]
    # the pycs go beside the sources, unoptimised, whatever the developer's environment says
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONOPTIMIZE", "PYTHONHOME")}
    subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    missing = without_bytecode(root, runtime)
    if missing:
        shown = ", ".join(str(p.relative_to(root)) for p in missing[:3]) + (", ..." if len(missing) > 3 else "")
        return (
            f"{len(missing)} module(s) ship without bytecode ({shown}): Python {wanted} could not compile them"
            " (a syntax error, or a file it cannot write beside)"
        )
    return None


def bytecode_tag(runtime: str = RUNTIME) -> str:
    """The interpreter tag in the names of ``runtime``'s pycs (``cpython-312``)."""
    return "cpython-" + runtime.removeprefix("python").replace(".", "")


def without_bytecode(root: Path, runtime: str = RUNTIME) -> list[Path]:
    """The modules under ``root`` that have no bytecode for ``runtime`` beside them."""
    tag = bytecode_tag(runtime)
    sources = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    return [p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").is_file()]


def _version_of(python: str) -> str | None:
    try:
        done = subprocess.run(
            [
                python,
                "-c",
                "import sys; print(f'{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}')",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    implementation, _, version = done.stdout.strip().partition(" ")
    return version if implementation == "cpython" else None
