"""What admission answers: the verdicts, what it needs to know of a job
(:class:`Candidate`), and its answer with the claims to settle (:class:`Admission`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from jobkit.core.spec import JobSpecification
from jobkit.records.keys import JobRef

SUPERSEDED_REASON = "a newer root job with the same signature was recorded"
DUPLICATE_REASON = "an identical job started after this one was enqueued, and succeeded"


class Verdict(StrEnum):
    RUN = "run"
    SUPERSEDED = "superseded"
    DUPLICATE = "duplicate"
    DEFER = "defer"
    REDELIVERED = "redelivered"


@dataclass(frozen=True)
class Candidate:
    """What the store needs to know about a job about to run."""

    spec: JobSpecification
    ignore_duplicates: bool
    dedup_hash: str | None
    deliver_once: bool
    lease_until: float
    #: It took its debounce window's run: the jobs it debounced count on it, so
    #: a root recorded while it waited does not skip it (it runs anyway).
    owes_run: bool = False
    #: It does not run unclaimed when the store is unavailable (a ``batch_callback`` type's job: its runner
    #: sends it again later); the store says so instead of "fail-open".
    waits_for_store: bool = False

    @property
    def claim_keys(self) -> tuple[tuple[str | None, ...], ...]:
        """The records this job's admission may write: two jobs that share one
        must be admitted one after the other."""
        spec = self.spec
        keys: list[tuple[str | None, ...]] = []
        if self.deliver_once:
            keys.append(("delivery", spec.type, spec.domain, spec.id))
        if self.ignore_duplicates and self.dedup_hash is not None:
            keys.append(("duplicate", spec.type, self.dedup_hash))
        if spec.has_root_job_params():
            keys.append(("root", spec.type, spec.domain, spec.root_job_signature))
        return tuple(keys)


@dataclass
class Admission:
    """The store's answer, and the claims to settle when the attempt ends."""

    verdict: Verdict
    reason: str = ""
    defer_s: int = 0
    unavailable: bool = False
    job_type: str = ""
    duplicate_key: str | None = None  # set when this attempt holds a duplicate claim
    delivery: JobRef | None = None  # set when this attempt holds a delivery claim
    root_pending: bool = False  # claimed; the root is still to be checked (DedupStore.confirm_root)
    _owner: str | None = field(default=None, repr=False)

    @property
    def claim_keys(self) -> tuple[tuple[str | None, ...], ...]:
        """The claims this attempt holds (the keys of :attr:`Candidate.claim_keys`)."""
        keys: list[tuple[str | None, ...]] = []
        if self.delivery is not None:
            keys.append(("delivery", self.delivery.job_type, self.delivery.domain, self.delivery.job_id))
        if self.duplicate_key is not None:
            keys.append(("duplicate", self.job_type, self.duplicate_key))
        return tuple(keys)

    @property
    def owner(self) -> str:
        """This attempt's token in the claims it takes (made when it first claims:
        a job that claims nothing costs no random bytes)."""
        if self._owner is None:
            self._owner = uuid.uuid4().hex
        return self._owner
