"""The pages: the overview, a type's dead letters and declaration, a job's attempts, a batch.

Each page calls the ops library as the matching command does (``jobkit
top``/``queues``, ``jobkit dlq list``, ``jobkit job``, ``jobkit batch``) and renders what it
returns; nothing here decides anything the commands would not.

Job params are shown only on a job's own page, folded (``<details>``): they
may hold personal data, and an operator looking for a traceback need not see
them. A large job's params are fetched from the payload bucket only when its
link asks for them (``?params=1``).

A job's page of a cancellable type shows its status as ``group.status`` reads
it (:meth:`~jobkit.status.control.JobControl.status`: with a cancellation
recorded after the job had started), and is there even when no record of the
job exists yet: a job still queued has none, and may be cancelled from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from jobkit.batches.report import batch_report
from jobkit.core.errors import JobKitError
from jobkit.core.wire import ID_PATTERN, valid_domain
from jobkit.ops import (
    ANY_DOMAIN,
    Reason,
    find_dead_letters,
    job_report,
    list_dead_letters,
    queue_summaries,
    resolve_scope,
    top_snapshot,
)
from jobkit.ops.dead_params import fetch_params
from jobkit.status.control import JobControl
from jobkit.ui.history import HistoryCache
from jobkit.ui.overview import overview
from jobkit.ui.settings import UiSettings

if TYPE_CHECKING:
    from jobkit.declaration.config import JobType
    from jobkit.ops import DeadLetter, JobReport
    from jobkit.ops.config import CliConfig
    from jobkit.records import FailureRecord

#: Failure records shown under "recent failures" on a type's page.
RECENT_FAILURES = 20


@dataclass(frozen=True)
class Failure:
    """A failure record with the dead letter it belongs to, for the type's page."""

    dead: DeadLetter
    record: FailureRecord


class Pages:
    """The GET routes. Their handlers are plain functions: Starlette runs them
    in its thread pool, where the blocking AWS calls belong."""

    def __init__(
        self, config: CliConfig, settings: UiSettings, templates: Jinja2Templates, history: HistoryCache
    ) -> None:
        self.config = config
        self.settings = settings
        self.templates = templates
        self.history = history

    def render(self, request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    # -- overview --------------------------------------------------------------------------------

    def overview_page(self, request: Request) -> Response:
        return self.render(request, "overview.html", {"overview": self._overview(), "page": "overview"})

    def overview_rows(self, request: Request) -> Response:
        """The overview's table alone: what the page fetches to refresh itself."""
        return self.render(request, "overview_table.html", {"overview": self._overview()})

    def _overview(self) -> Any:
        config, now = self.config, self.config.now()
        queues = queue_summaries(config.sqs, config.cloudwatch, config.declaration, config.directory, now=now)
        snapshot = top_snapshot(
            config.sqs,
            config.cloudwatch,
            config.declaration,
            config.directory,
            now=now,
            window_s=self.settings.window_s,
        )
        return overview(queues, snapshot, self.history.get(now))

    # -- a type ----------------------------------------------------------------------------------

    def type_page(self, request: Request) -> Response:
        config, now = self.config, self.config.now()
        name = request.path_params["name"]
        job_type = config.declaration.job_type(name)  # UnknownJobType: the app's 404
        reason = request.query_params.get("reason") or None
        error = request.query_params.get("error") or None
        scope = resolve_scope(config.declaration, name)
        # On a shared queue, the DLQ's messages that are no job of any type (a body
        # that does not parse) are listed with each of its types: they can only have
        # come from this queue, and would otherwise be on no page.
        listed = resolve_scope(config.declaration, job_type.queue) if scope.shared else scope
        listing = list_dead_letters(
            config.sqs,
            config.directory,
            listed,
            records=config.records,
            now=now,
            limit=self.settings.dead_letter_limit,
        )
        if scope.shared:
            kept = [d for d in listing.items if d.owner(scope) is None or scope.includes(d.owner(scope))]
            listing = replace(listing, scope=scope, items=kept)
        shown = [d for d in listing.items if (reason is None or d.reason == reason) and d.error_matches(error)]
        failures = sorted(
            (Failure(dead, record) for dead in listing.items for record in dead.failures),
            key=lambda f: f.record.at,
            reverse=True,
        )[:RECENT_FAILURES]
        reasons = sorted({*(str(r) for r in Reason), *(d.reason for d in listing.items)})
        context = {
            "page": "type",
            "job_type": job_type,
            "queue": config.declaration.queues[job_type.queue],
            "scope": scope,
            "listing": listing,
            "shown": shown,
            "failures": failures,
            "reason": reason,
            "error": error,
            "reasons": reasons,
            "now": now,
        }
        return self.render(request, "type.html", context)

    # -- a job -----------------------------------------------------------------------------------

    def job_page(self, request: Request) -> Response:
        config, now = self.config, self.config.now()
        name = request.path_params["name"]
        job_type = config.declaration.job_type(name)
        job_id = request.query_params.get("id", "")
        if not job_id:
            return self.render(request, "error.html", {"message": "which job? give ?id=JOB_ID"}, status_code=400)
        report = job_report(config.records, config.declaration, job_id, job_type=name)
        scope = resolve_scope(config.declaration, name)
        dead = find_dead_letters(config.sqs, config.directory, scope, job_id, records=config.records, now=now)
        found = report.found or bool(dead.items)
        if not found and not job_type.cancellable:
            message = report.not_found(name, ANY_DOMAIN) + ", and it is not in the dead-letter queue"
            return self.render(request, "error.html", {"message": message}, status_code=404)
        context = {
            "page": "job",
            "job_type": job_type,
            "job_id": job_id,
            "report": self._with_cancellations(job_type, report),
            "dead": dead.items,
            # a large job's params, from the payload bucket: only when asked (?params=1)
            "fetched": {d.message_id: fetch_params(d, config.payloads) for d in dead.items}
            if request.query_params.get("params") == "1"
            else {},
            "scope": scope,
            "now": now,
            # the domains its records know it in: one Cancel button each (none known: a domain field)
            "cancel_domains": list(
                dict.fromkeys([*(m.domain for m in report.matches), *(d.domain for d in dead.items)])
            ),
        }
        return self.render(request, "job.html", context, status_code=200 if found else 404)

    # -- a batch ---------------------------------------------------------------------------------

    def batch_page(self, request: Request) -> Response:
        """A batch (``jobkit batch``): its progress, callbacks, failures and what it waits for;
        without ``?id=``, a form that asks for one."""
        batch_id = request.query_params.get("id", "").strip()
        domain = request.query_params.get("domain") or None
        context: dict[str, Any] = {"page": "batch", "batch_id": batch_id, "domain": domain, "report": None}
        if not batch_id:
            return self.render(request, "batch.html", context)
        if not ID_PATTERN.fullmatch(batch_id) or (domain is not None and not valid_domain(domain)):
            message = f"a batch ID matches {ID_PATTERN.pattern}, and a domain is at most 255 bytes"
            return self.render(request, "error.html", {"message": message}, status_code=400)
        try:
            report = batch_report(self.config.records, batch_id, domain)
        except JobKitError as exc:  # never opened in that domain
            return self.render(request, "error.html", {"message": str(exc)}, status_code=404)
        return self.render(request, "batch.html", {**context, "report": report, "now": self.config.now()})

    def _with_cancellations(self, job_type: JobType, report: JobReport) -> JobReport:
        """The statuses as ``group.status`` reads them: with the job's cancellation, if one was recorded."""
        if not (job_type.cancellable and job_type.track_status):
            return report
        config = self.config
        control = JobControl(config.declaration, config.records, config.clock)
        matches = [
            replace(m, status=control.status(m.job_type, m.job_id, m.domain)) if m.status is not None else m
            for m in report.matches
        ]
        return replace(report, matches=matches)
