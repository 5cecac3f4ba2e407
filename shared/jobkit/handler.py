"""The runner Lambda's handler: ``Handler: jobkit.handler.handler``, from the jobkit layer.

The function's own code is the app's job package; this module wires the runner
from the function's environment (:mod:`jobkit.lambda_wiring`) on the first
invocation, not at import time, and keeps it for the container's life.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobkit.runner import Runner


@cache
def _runner() -> Runner:
    from jobkit.lambda_wiring import runner_from_environment

    return runner_from_environment(os.environ)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The SQS event source mapping's entry: run a batch, report its failures."""
    return _runner().handle(event, context)
