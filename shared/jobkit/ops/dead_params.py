"""A large dead letter's params, fetched from the payload bucket on request.

A dead letter whose params were too large for its message holds a reference
to them (wire version 3), not the params: ``jobkit dlq show --params`` and
the web view's job page fetch them only when asked, with the runner's own
checks (size, SHA-256, JSON). Whatever the bucket answers, the fetch never
raises: a missing object, a wrong hash or a bucket that cannot be reached is
shown as the problem, and the dead letter can still be redriven or deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobkit.core.errors import JobKitError
from jobkit.ops.bodies import safe_text

if TYPE_CHECKING:
    from jobkit.ops.dead_letters import DeadLetter
    from jobkit.payloads.reference import ParamsRef
    from jobkit.payloads.store import PayloadStore

#: What to do when the tool has no bucket to fetch from.
NO_BUCKET = "no payload bucket to fetch them from: set $JOBKIT_PAYLOAD_BUCKET to the stack's PayloadBucketName output"


@dataclass(frozen=True)
class FetchedParams:
    """A dead letter's params as the bucket gave them (``params``), or why it did not (``problem``)."""

    ref: ParamsRef
    params: dict[str, Any] | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = self.ref.to_wire()
        if self.problem is None:
            data["params"] = self.params
        else:
            data["problem"] = self.problem
        return data


def fetch_params(dead: DeadLetter, store: PayloadStore | None) -> FetchedParams | None:
    """The params of a dead letter that holds a reference (None: its params are in its body). Never raises
    (the store turns what S3 and botocore raise into :class:`~jobkit.core.errors.JobKitError`)."""
    from jobkit.payloads.reference import params_from

    ref = dead.params_ref
    if ref is None:
        return None
    if store is None:
        return FetchedParams(ref, problem=NO_BUCKET)
    try:
        return FetchedParams(ref, params=params_from(store.get(ref), ref))
    except JobKitError as exc:
        return FetchedParams(ref, problem=safe_text(str(exc)))
