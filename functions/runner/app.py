"""The runner Lambda: wiring only. The logic is in jobkit.runner; the job
classes are in jobtypes/, declared in infra/jobs.toml."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from jobkit.lambda_wiring import runner_from_environment


@cache
def _runner() -> Any:
    # Built once per container, on the first invocation, not at import time.
    return runner_from_environment(os.environ)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _runner().handle(event, context)
