"""Modules that moved into packages keep their old import path for one
release: it warns, and gives the same objects."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import jobkit
from jobkit.core.moved import MOVED


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


def test_a_moved_module_is_an_attribute_of_jobkit_too() -> None:
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import jobkit\n"
        "print(jobkit.errors.NonRetryableError is jobkit.NonRetryableError, jobkit.spec.JobSpecification.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "JobSpecification"]


def test_the_packages_that_replaced_modules_answer_for_their_old_names() -> None:
    import jobkit.dedup
    import jobkit.status
    from jobkit.dedup.store import DedupStore
    from jobkit.records import JobStatus, TableUnavailable
    from jobkit.status.tracker import RecordingStatusTracker

    with pytest.warns(DeprecationWarning, match="jobkit.dedup.store"):
        assert jobkit.dedup.DedupStore is DedupStore
    with pytest.warns(DeprecationWarning, match="jobkit.records"):
        assert jobkit.dedup.DedupUnavailable is TableUnavailable
    with pytest.warns(DeprecationWarning, match="jobkit.status.tracker"):
        assert jobkit.status.RecordingStatusTracker is RecordingStatusTracker
    with pytest.warns(DeprecationWarning):
        assert jobkit.status.JobStatus is JobStatus
    with pytest.raises(AttributeError):
        jobkit.dedup.NoSuchThing  # noqa: B018
