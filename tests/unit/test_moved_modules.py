"""Modules that moved into packages keep their old import path for one
release: it warns, and gives the same objects."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import jobkit
from jobkit._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_new_modules_names_and_warns(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old]):
        module = importlib.import_module(old)
    new = importlib.import_module(MOVED[old])
    public = [name for name in vars(new) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(new, name) for name in public)


def test_an_app_catching_the_old_path_catches_what_jobkit_raises() -> None:
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import jobkit\n"
        "try:\n"
        "    from jobkit.errors import NonRetryableError\n"
        "except DeprecationWarning as w:\n"
        "    print('warned:', w)\n"
        "warnings.simplefilter('ignore')\n"
        "from jobkit.errors import NonRetryableError\n"
        "from jobkit.config import load_declaration\n"
        "print(NonRetryableError is jobkit.NonRetryableError)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "warned: jobkit.errors moved to jobkit.core.errors" in out
    assert out.strip().endswith("True")


def test_a_name_that_never_existed_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("jobkit.no_such_module")
    assert "jobkit.dedup" not in MOVED and jobkit.__name__ == "jobkit"
