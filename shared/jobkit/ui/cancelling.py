"""Cancel a job, or every job of a type pushed until now, from the pages: ``jobkit cancel``.

Both go through :class:`~jobkit.status.control.JobControl`, by the ops
functions the command calls (:func:`jobkit.ops.cancel.cancel_one` and
:func:`~jobkit.ops.cancel.cancel_all`), signed ``operator user@host (web
view)``, and behind the guards and the confirmation of every action
(:mod:`jobkit.ui.actions`):

- **one job** (a job's page, or a type's): its ID and domain (empty: the jobs
  without one) come from the form; the answer says whether its records say it
  had ended already (the cancellation is recorded anyway, so a copy redriven
  from the DLQ stays cancelled);
- **every job pushed until now** (a type's page), in one domain: the question
  fixes "now" (the time the operator asked) and the confirmation carries it,
  so a job pushed while the question was on screen runs.

A redrive keeps a cancelled job cancelled unless its form asks to lift the
cancellations (``uncancel``, as ``jobkit dlq redrive --uncancel``):
:meth:`Cancelling.lifter` is what it passes to :func:`~jobkit.ops.redrive`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jobkit.core.errors import JobKitError, NotCancellable
from jobkit.core.wire import ID_PATTERN
from jobkit.ops.cancel import cancel_all, cancel_one, lifter, operator, parse_time
from jobkit.ops.redrive import Uncancel
from jobkit.status.control import JobControl

if TYPE_CHECKING:
    from jobkit.ops import Scope
    from jobkit.ops.config import CliConfig

#: What the cancellations from the pages are signed with, after the operator.
WEB_VIEW = " (web view)"


def signature() -> str:
    """Who cancels, from the pages: ``operator user@host (web view)``."""
    return operator() + WEB_VIEW


def job_url(job_type: str, job_id: str) -> str:
    return f"/types/{quote(job_type, safe='')}/job?id={quote(job_id, safe='')}"


def where(domain: str | None) -> str:
    return f"in domain {domain!r}" if domain is not None else "without a domain"


def _first(form: dict[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return (values[0].strip() or None) if values else None


def _domain(form: dict[str, list[str]]) -> str | None:
    """The domain field as typed (``"wiki "`` is another domain than ``"wiki"``: the
    question names it as given); empty means the jobs without a domain."""
    values = form.get("domain")
    return (values[0] or None) if values else None


class Cancelling:
    """The cancel actions: with ``confirmed`` False, what each would do; with True, what it did."""

    def __init__(self, config: CliConfig) -> None:
        self.config = config

    def cancel(self, scope: Scope, form: dict[str, list[str]], confirmed: bool) -> dict[str, Any]:
        self._cancellable(scope.name)
        job_id = _first(form, "id") or ""
        if not ID_PATTERN.fullmatch(job_id):
            raise JobKitError(f"which job? a job ID must match {ID_PATTERN.pattern}, got {job_id!r}")
        domain = _domain(form)
        context: dict[str, Any] = {
            "job_id": job_id,
            "domain": domain,
            "where": where(domain),
            "back": job_url(scope.name, job_id),
            "report": None,
            "nothing": False,
        }
        if confirmed:
            context["report"] = cancel_one(self._control(), scope.name, job_id, domain, signature())
        return context

    def cancel_all(self, scope: Scope, form: dict[str, list[str]], confirmed: bool) -> dict[str, Any]:
        self._cancellable(scope.name)
        domain = _domain(form)
        given = _first(form, "before")
        before = parse_time(given) if given is not None else None
        context: dict[str, Any] = {"domain": domain, "where": where(domain), "report": None, "nothing": False}
        if not confirmed:
            # "until now" is when the operator asked: the confirmation carries that time
            before = self.config.now() if before is None else before
            context.update(before=before, carry=[] if given is not None else [("before", repr(before))])
            return context
        report = cancel_all(self._control(), scope.name, domain, before, signature())
        context.update(before=report.before, report=report)
        return context

    def lifter(self) -> Uncancel:
        """What a redrive with ``uncancel`` calls for each job it sends back."""
        self.config.now()  # the local stack's clock, if the endpoint is one
        return lifter(self.config.declaration, self.config.records, self.config.clock, signature())

    def _control(self) -> JobControl:
        self.config.now()  # the local stack's clock, if the endpoint is one
        return JobControl(self.config.declaration, self.config.records, self.config.clock)

    def _cancellable(self, job_type: str) -> None:
        """Refuse before asking: a type that is not cancellable has nothing to confirm."""
        if not self.config.declaration.job_type(job_type).cancellable:
            raise NotCancellable(job_type)
