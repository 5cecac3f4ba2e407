"""The pytest plugin behind ``jobkit_stack`` (registered as the ``pytest11`` entry point ``jobkit``).

It imports nothing heavy at load time: projects that install jobkit without
the ``local`` extra still start pytest normally.
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
    parser.addini("jobkit_config", "the job declaration for jobkit_stack (default: $JOBKIT_CONFIG, infra/jobs.toml)")


@pytest.fixture
def jobkit_stack(request: pytest.FixtureRequest) -> Iterator[JobkitStack]:
    """A fresh local stack (in-process moto) with the declared queues and table."""
    from jobkit.config import load_declaration
    from jobkit.testing import JobkitStack

    configured = request.config.getini("jobkit_config") or os.environ.get("JOBKIT_CONFIG") or "infra/jobs.toml"
    path = Path(configured)
    if not path.is_absolute():
        path = Path(request.config.rootpath) / path
    with JobkitStack(load_declaration(path)) as stack:
        yield stack
