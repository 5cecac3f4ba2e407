"""Cancelling from the CLI: one job, or every job of a type pushed before a
time, through the same :class:`jobkit.status.control.JobControl` an app's
``group.cancel`` uses, signed by the operator."""

from __future__ import annotations

import getpass
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobkit.core.errors import JobKitError
from jobkit.records.cancellations import when
from jobkit.status.control import JobControl

if TYPE_CHECKING:
    from jobkit.core.clock import Clock
    from jobkit.declaration.config import Declaration
    from jobkit.ops.dead_letters import DeadLetter
    from jobkit.ops.redrive import Uncancel
    from jobkit.records.store import Records


def operator() -> str:
    """Who cancels, as records and log lines show it: ``operator user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "unknown"
    return f"operator {user}@{socket.gethostname()}"


def parse_time(text: str) -> float:
    """``--before``: epoch seconds, or an ISO 8601 time (UTC unless it says otherwise).

    Raises:
        JobKitError: neither.
    """
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise JobKitError(
            f"--before {text!r}: give epoch seconds or an ISO 8601 time, e.g. 2026-11-27T08:00:00Z"
        ) from None
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True)
class CancelReport:
    job_type: str
    domain: str | None
    by: str
    job_id: str | None = None
    not_ended: bool | None = None  # one job: False if its records say it had ended
    before: float | None = None  # every job pushed at or before this

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.job_type, "domain": self.domain, "by": self.by}
        if self.job_id is not None:
            data |= {"job_id": self.job_id, "cancelled": True, "had_ended": not self.not_ended}
        else:
            data |= {"pushed_before": self.before, "pushed_before_iso": _iso(self.before or 0)}
        return data

    def text(self) -> str:
        where = f" in domain {self.domain!r}" if self.domain is not None else " without a domain"
        if self.job_id is not None:
            if self.not_ended:
                return f"cancelled {self.job_type} {self.job_id}{where}: it will not run (if running: when it checks)"
            return (
                f"recorded the cancellation of {self.job_type} {self.job_id}{where}, but its records say it had"
                " ended already (a copy redriven from the DLQ stays cancelled)"
            )
        when = _iso(self.before or 0)
        return f"cancelled every {self.job_type} job{where} pushed at or before {when} that has not started"


def cancel_one(control: JobControl, job_type: str, job_id: str, domain: str | None, by: str) -> CancelReport:
    not_ended = control.cancel(job_type, job_id, domain, by=by)
    return CancelReport(job_type, domain, by, job_id=job_id, not_ended=not_ended)


def cancel_all(control: JobControl, job_type: str, domain: str | None, before: float | None, by: str) -> CancelReport:
    mark = control.cancel_all(job_type, domain, pushed_before=before, by=by)
    return CancelReport(job_type, domain, by, before=mark.before)


def lifter(declaration: Declaration, records: Records, clock: Clock, by: str) -> Uncancel:
    """``dlq redrive --uncancel``: lifts the cancellations of a dead letter's push
    (that push only: another push of its ID stays cancelled), for a
    cancellable type (another type's jobs have none to lift). The push is
    named by the ``enqueuedAt`` its producer stamped, which the body keeps."""
    control = JobControl(declaration, records, clock)

    def lift(dead: DeadLetter, message: Mapping[str, Any]) -> None:
        spec = dead.spec
        if spec is None or spec.type not in declaration.types or not declaration.types[spec.type].cancellable:
            return
        control.uncancel(spec.type, spec.id, spec.domain, by=by, pushed_at=spec.enqueued_at)

    return lift


def _iso(at: float) -> str:
    return when(at).replace("+00:00", "Z")
