"""Counting a batch's members in before they are sent.

A member is counted in (:meth:`jobkit.records.batches.Batches.add`) before its
message is sent, so no member can end before the batch knows of it; one the
push then could not send is withdrawn, so the batch does not wait for it.
A job a member pushes while it runs joins the member's batch
(:class:`jobkit.jobs.children.ChildIds`): it is counted in while its parent
is still pending, so a fan-out of any depth is one batch.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from jobkit.core.errors import BatchError, JobKitError
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration
from jobkit.records import BATCH_RECORD_TTL_S
from jobkit.records.batches import BatchRef, Member
from jobkit.records.store import Records

log = logging.getLogger(__name__)


@dataclass
class Enrolment:
    """The batch members of one push, counted in."""

    records: Records | None = None
    members: dict[tuple[str, str], BatchRef] = field(default_factory=dict)  # (type, id) -> its batch

    def withdraw(self, unsent: Collection[tuple[str, str]]) -> None:
        """Take the members that were not sent back out (logged if the table is down:
        the batch then waits for them, and ``jobkit batch`` lists them as pending)."""
        by_batch: dict[BatchRef, list[Member]] = {}
        for key in unsent:
            if key in self.members:
                by_batch.setdefault(self.members[key], []).append(Member(*key))
        for ref, members in by_batch.items():
            assert self.records is not None
            try:
                self.records.batches.withdraw(ref, members)
            except JobKitError as exc:
                log.error(
                    "batch %s: %d member(s) not sent could not be taken out, and it waits for them: %s",
                    ref.batch_id,
                    len(members),
                    exc,
                )


def enrol(
    declaration: Declaration,
    records: Records | None,
    specs: Sequence[JobSpecification],
    now: float,
    *,
    pusher: JobSpecification | None = None,
) -> Enrolment:
    """Count in the batch members among ``specs`` (each with its domain set).
    ``pusher``: the job that pushes them, whose own batch is open (and may be sealed).

    Raises:
        BatchError: a member of a type that does not declare ``batches``; of a
            batch never opened, or sealed (but the pusher's own).
        JobKitError: no jobs table to count them in.
        TableUnavailable: nothing was sent; some members may have been counted
            in, and are withdrawn when possible.
    """
    members = [spec for spec in specs if spec.batch is not None]
    if not members:
        return Enrolment()
    for spec in members:
        if not declaration.job_type(spec.type).batches:
            raise BatchError(
                f"{spec.type}: its jobs cannot be batch members: declare batches = true in [types.{spec.type}]"
                " and deploy (its runner then counts each member's end)"
            )
    if records is None:
        raise JobKitError("batch members need the jobs table: use jobkit.queue_group(), or pass records")
    by_batch: dict[BatchRef, list[Member]] = {}
    for spec in members:
        by_batch.setdefault(BatchRef(str(spec.batch), spec.domain), []).append(Member(spec.type, spec.id))
    # Only the members this push counted in are its to withdraw: one counted in
    # before (a retried parent's child, pushed again) may be on its way already.
    enrolment = Enrolment(records)
    own = BatchRef(pusher.batch, pusher.domain) if pusher is not None and pusher.batch is not None else None
    try:
        for ref, batch_members in by_batch.items():
            counted: list[Member] = []
            try:
                # each write checks the batch was opened, and (but the pusher's own) is not sealed
                records.batches.add(
                    ref, batch_members, now, int(now) + BATCH_RECORD_TTL_S, open_only=ref != own, counted=counted
                )
            finally:
                enrolment.members.update({(m.job_type, m.job_id): ref for m in counted})
    except JobKitError:
        enrolment.withdraw(list(enrolment.members))
        raise
    return enrolment
