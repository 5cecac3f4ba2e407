"""The pytest plugin behind ``jobkit_stack`` (registered as the ``pytest11`` entry point ``jobkit``).

It lives outside :mod:`jobkit.testing` and imports nothing at load time, so
pytest starts normally in a project that has jobkit without the ``local``
extra; only a test that asks for ``jobkit_stack`` then fails, naming the extra.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from jobkit.testing import JobkitStack


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "jobkit_config",
        "the job declaration for jobkit_stack, relative to the ini file (default: $JOBKIT_CONFIG, "
        "else infra/jobs.toml under the rootdir)",
    )


def declaration_path(config: pytest.Config) -> Path:
    """Where ``jobkit_stack`` reads the declaration, wherever pytest was started:

    1. the ``jobkit_config`` ini option, relative to the ini file that sets it;
    2. ``$JOBKIT_CONFIG``, relative to the current directory;
    3. ``infra/jobs.toml`` under pytest's rootdir.
    """
    configured = config.getini("jobkit_config")
    if configured:
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        return base / str(configured)
    if os.environ.get("JOBKIT_CONFIG"):
        return Path(os.environ["JOBKIT_CONFIG"]).absolute()
    return config.rootpath / "infra" / "jobs.toml"


@pytest.fixture
def jobkit_stack(request: pytest.FixtureRequest) -> Iterator[JobkitStack]:
    """A fresh local stack (in-process moto) with the declared queues and table."""
    from jobkit.core.extras import MissingExtra

    try:
        from jobkit.testing import JobkitStack
    except MissingExtra as exc:
        pytest.fail(f"jobkit_stack: {exc}", pytrace=False)

    path = declaration_path(request.config)
    if not path.is_file():
        pytest.fail(
            f"jobkit_stack: no job declaration at {path}. Set the `jobkit_config` ini option to its path, "
            "relative to the ini file (jobkit_config = infra/jobs.toml under [pytest] in pytest.ini, or under "
            "[tool.pytest.ini_options] in pyproject.toml), or set $JOBKIT_CONFIG",
            pytrace=False,
        )
    with JobkitStack.from_config(path) as stack:
        yield stack
