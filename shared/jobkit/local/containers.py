"""The runner containers of one queue on the local stack, as Lambda keeps them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobkit.runner import Runner


class Containers:
    """A queue's runner "containers": a batch goes to an idle one, and a batch
    delivered while every one is busy (a job's own code polling the stack, as
    a test does to run jobs "at once") gets a new one, as Lambda starts
    another container rather than run two batches in one."""

    def __init__(self, build: Callable[[], Runner]) -> None:
        self._build = build
        self.first = build()
        self._idle = [self.first]

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        runner = self._idle.pop() if self._idle else self._build()
        try:
            return runner.handle(event, context)
        finally:
            self._idle.append(runner)
