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
    install of it, and the Python running the build."""
    environ = os.environ if environ is None else environ
    named = environ.get(RUNTIME_PYTHON_VARIABLE)
    if named:
        return named
    version = runtime.removeprefix("python")
    pyenv = Path(environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = [
        shutil.which(runtime),
        *sorted(str(p) for p in pyenv.glob(f"{version}*/bin/{runtime}")),
        sys.executable,
    ]
    for candidate in candidates:
        if candidate and _version_of(candidate) == version:
            return candidate
    return None


def compile_for_runtime(root: Path, runtime: str = RUNTIME, python: str | None = None) -> str | None:
    """Compile every ``.py`` under ``root`` into unchecked hash-based pycs for
    ``runtime``. Returns ``None``, or what went wrong and what to do (the build
    goes on: code without bytecode runs, only its cold starts are slower)."""
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
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(root)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        failed = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-3:]
        return "some files did not compile, and ship without bytecode: " + " / ".join(failed)
    return None


def _version_of(python: str) -> str | None:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()
