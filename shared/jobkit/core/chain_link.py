"""Where a job stands in a chain (:meth:`jobkit.JobQueueGroup.chain`): the
chain's ID, the job's step, and what the step before it left for it.

A chain's step is a batch, so a step's job is a batch member and its body is
of wire version 2; ``chain`` rides beside ``batch`` in it (docs/wire-format.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The most steps a chain may have (its step numbers are at most this).
MAX_STEPS = 1000


@dataclass(frozen=True)
class ChainLink:
    """A chain's step, as its jobs' bodies carry it.

    Attributes:
        chain_id: the chain's ID, in the job's domain.
        step: 1 for the first step, 2 for the next, and so on.
        previous_result: what the step before left: its job's result (a step
            of one job of a ``track_status`` type), or its batch's summary (any
            other step); None for the first step.
    """

    chain_id: str
    step: int
    previous_result: Any = None

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.chain_id, "step": self.step}
        if self.previous_result is not None:
            data["previousResult"] = self.previous_result
        return data
