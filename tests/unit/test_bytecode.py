"""Bytecode in what sam build ships: unchecked hash-based pycs for the runtime's
Python, or a warning that names the fix when the build machine lacks it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobkit.sam.bytecode import RUNTIME_PYTHON_VARIABLE, compile_for_runtime, runtime_python

THIS = f"python{sys.version_info.major}.{sys.version_info.minor}"
TAG = f"cpython-{sys.version_info.major}{sys.version_info.minor}"


def _tree(root: Path) -> Path:
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "__init__.py").write_text("")
    (root / "jobs" / "welcome.py").write_text("GREETING = 'hello'\n")
    return root


def test_the_code_gets_unchecked_hash_based_bytecode_for_the_runtime(tmp_path: Path) -> None:
    root = _tree(tmp_path / "code")
    assert compile_for_runtime(root, runtime=THIS, python=sys.executable) is None
    pyc = root / "jobs" / "__pycache__" / f"welcome.{TAG}.pyc"
    assert pyc.is_file()
    assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 1  # hash-based, never checked against the source
    # Lambda's code directory is read-only: the import uses the shipped bytecode, even
    # once packaging has changed the source's time
    os.utime(root / "jobs" / "welcome.py", (0, 0))
    for path in [root, *root.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import jobs.welcome, sys; print(jobs.welcome.__cached__)"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
    finally:
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert done.stdout.strip().endswith(f"welcome.{TAG}.pyc")


def test_without_the_runtimes_python_the_build_goes_on_and_names_the_fix(tmp_path: Path) -> None:
    root = _tree(tmp_path / "code")
    problem = compile_for_runtime(root, runtime="python3.99", python=None)
    assert problem is not None
    assert "every cold start compiles it again" in problem
    assert "Install Python 3.99" in problem and RUNTIME_PYTHON_VARIABLE in problem
    assert not list(root.rglob("*.pyc"))


def test_a_python_of_another_version_compiles_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path / "code")
    problem = compile_for_runtime(root, runtime="python3.99", python=sys.executable)
    assert problem is not None and "not 3.99" in problem and RUNTIME_PYTHON_VARIABLE in problem
    assert not list(root.rglob("*.pyc"))


def test_the_runtimes_python_is_the_named_one_first() -> None:
    assert runtime_python("python3.99", {RUNTIME_PYTHON_VARIABLE: "/opt/py/bin/python3.99"}) == "/opt/py/bin/python3.99"
    assert runtime_python(THIS, {}) is not None  # on the PATH, or the build's own


def test_a_python_on_the_path_that_does_not_run_or_is_another_version_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pyenv shim of a version that is not activated fails; a wrapper of another Python is not 3.99
    shim, wrapper = tmp_path / "shims", tmp_path / "bin"
    shim.mkdir(), wrapper.mkdir()
    (shim / "python3.99").write_text("#!/bin/sh\necho 'pyenv: python3.99: command not found' >&2\nexit 127\n")
    (wrapper / "python3.99").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    for script in (shim / "python3.99", wrapper / "python3.99"):
        script.chmod(0o755)
    for path in (shim, wrapper):
        monkeypatch.setenv("PATH", f"{path}{os.pathsep}{os.environ['PATH']}")
        assert runtime_python("python3.99", {"PYENV_ROOT": str(tmp_path / "no-pyenv")}) is None


def test_modules_left_without_bytecode_are_named_and_the_developers_environment_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by review: a file that does not compile was not named; a PYTHONPYCACHEPREFIX or
    # PYTHONOPTIMIZE in the builder's shell put the bytecode where Lambda never looks
    root = _tree(tmp_path / "my code")
    (root / "jobs" / "legacy.py").write_text("print 'python 2'\n")
    (root / "jobs" / "sub").mkdir()
    (root / "jobs" / "sub" / "broken.py").write_text("def f(:\n")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PYTHONOPTIMIZE", "1")
    problem = compile_for_runtime(root, runtime=THIS, python=sys.executable)
    assert problem is not None
    assert problem.startswith("2 module(s) ship without bytecode (jobs/legacy.py, jobs/sub/broken.py)")
    assert (root / "jobs" / "__pycache__" / f"welcome.{TAG}.pyc").is_file()
