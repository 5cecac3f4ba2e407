"""Redrive, delete and purge, from a type's page: ``jobkit dlq redrive|delete|purge``;
and cancel, one job or every job pushed until now: ``jobkit cancel`` (:mod:`jobkit.ui.cancelling`).

Off unless ``jobkit ui --allow-actions``: then no page shows a button, and
every POST answers 403 before its form is even read. On, each action is

1. refused unless it comes from one of this UI's own pages (:mod:`jobkit.ui.csrf`);
2. asked about first: without ``confirm=yes`` in its form, the answer is a
   page that says what would happen (a redrive's dry run: the messages it
   would send back) and a form that asks again, with ``confirm=yes``;
3. done by the ops function the command calls, and answered with what it
   moved, removed or cancelled (the :class:`~jobkit.ops.RedriveReport`,
   :class:`~jobkit.ops.RemovalReport` or :class:`~jobkit.ops.cancel.CancelReport`).

What it cannot do (a type that is not cancellable, a job ID that is no job
ID, the jobs table unavailable) is answered with a page that says so, and
what was not done; never with a 500.

A redrive is of one dead letter (by its message ID, as ``--id``), of all of
them, or of those the type's page shows under its filters: the form carries
the message IDs of the rows shown (``--id`` each), so what is sent back is
what the operator saw, and the error text is checked again against the
verified error (``--error-contains``). A filter by reason is the page's own
(``jobkit dlq`` has none), which is why the IDs, not the filter, say what goes.
A cancelled job sent back stays cancelled, unless the form ticks ``uncancel``
(``--uncancel``), which the question asks again for a cancellable type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.templating import Jinja2Templates

from jobkit.core.errors import JobKitError, UnknownJobType
from jobkit.ops import delete, purge, redrive, resolve_scope
from jobkit.records import TableUnavailable
from jobkit.ui.cancelling import Cancelling
from jobkit.ui.csrf import CsrfGuard
from jobkit.ui.settings import UiSettings

if TYPE_CHECKING:
    from jobkit.ops import RedriveReport, Scope
    from jobkit.ops.config import CliConfig

#: The largest form an action reads (its fields are IDs and filters).
MAX_FORM_BYTES = 64 * 1024
#: The redrive selections.
ONE, FILTERED, ALL = "one", "filtered", "all"
#: How the pages name each action (its route's last part is the key).
LABELS = {
    "redrive": "redrive",
    "delete": "delete",
    "purge": "purge",
    "cancel": "cancel",
    "cancel-all": "cancel all",
}


@dataclass(frozen=True)
class Selection:
    """Which dead letters of a type's DLQ a redrive takes."""

    mode: str
    ids: tuple[str, ...] = ()
    reason: str | None = None
    error: str | None = None

    def describe(self) -> str:
        if self.mode == ONE:
            return f"dead letter {', '.join(self.ids)}"
        if self.mode == ALL:
            return "every dead letter"
        filters = [
            f"reason {self.reason}" if self.reason else "",
            f"error containing {self.error!r}" if self.error else "",
        ]
        chosen = " and ".join(f for f in filters if f)
        shown = f"the {len(self.ids)} shown"
        return f"{shown}, with {chosen}" if chosen else shown


def _first(form: dict[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return (values[0].strip() or None) if values else None


class Actions:
    """The POST routes."""

    def __init__(self, config: CliConfig, settings: UiSettings, templates: Jinja2Templates, csrf: CsrfGuard) -> None:
        self.config = config
        self.settings = settings
        self.templates = templates
        self.csrf = csrf
        self.cancelling = Cancelling(config)

    async def redrive(self, request: Request) -> Response:
        return await self._act(request, "redrive", self._redrive)

    async def delete(self, request: Request) -> Response:
        return await self._act(request, "delete", self._delete)

    async def purge(self, request: Request) -> Response:
        return await self._act(request, "purge", self._purge)

    async def cancel(self, request: Request) -> Response:
        return await self._act(request, "cancel", self.cancelling.cancel)

    async def cancel_all(self, request: Request) -> Response:
        return await self._act(request, "cancel-all", self.cancelling.cancel_all)

    async def _act(
        self,
        request: Request,
        action: str,
        run: Callable[[Scope, dict[str, list[str]], bool], dict[str, Any]],
    ) -> Response:
        if not self.settings.allow_actions:
            return PlainTextResponse("actions are off: start jobkit ui with --allow-actions\n", status_code=403)
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return PlainTextResponse("form too large\n", status_code=413)
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return PlainTextResponse("expected a form\n", status_code=415)
        form = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        problem = self.csrf.problem(request, form)
        if problem is not None:
            return PlainTextResponse(f"refused: {problem}\n", status_code=403)
        name = request.path_params["name"]
        confirmed = _first(form, "confirm") == "yes"
        try:
            self.config.declaration.job_type(name)
            scope = resolve_scope(self.config.declaration, name)
            context = await run_in_threadpool(run, scope, form, confirmed)
        except JobKitError as exc:
            return self._not_done(request, action, exc)
        fields = [(k, v) for k, values in form.items() if k not in ("confirm", "csrf") for v in values]
        context.setdefault("back", f"/types/{quote(name, safe='')}")
        context.update(
            {
                "action": action,
                "label": LABELS[action],
                "scope": scope,
                "job_type": name,
                "fields": fields + context.pop("carry", []),
            }
        )
        page = "done.html" if confirmed else "confirm.html"
        return self.templates.TemplateResponse(request, page, context)

    def _not_done(self, request: Request, action: str, exc: JobKitError) -> Response:
        """What an action could not do, and why: a page, never a 500."""
        if isinstance(exc, UnknownJobType):
            status, message = 404, str(exc)
        elif isinstance(exc, TableUnavailable):
            status, message = 503, f"the jobs table could not answer, so nothing was done: {exc}; try again"
        else:
            status, message = 400, str(exc)
        context = {"message": message, "heading": f"{LABELS[action].capitalize()}: not done"}
        return self.templates.TemplateResponse(request, "error.html", context, status_code=status)

    # -- each action: with confirmed False, what it would do; with True, what it did -------------

    def _redrive(self, scope: Scope, form: dict[str, list[str]], confirmed: bool) -> dict[str, Any]:
        selection = _selection(form)
        cancellable = self.config.declaration.job_type(scope.name).cancellable
        uncancel = cancellable and _first(form, "uncancel") == "yes"
        lifts = {"cancellable": cancellable, "uncancel": uncancel}
        if selection.mode != ALL and not selection.ids:
            return {"selection": selection, "report": None, "nothing": True, **lifts}
        config = self.config
        report: RedriveReport = redrive(
            config.sqs,
            config.directory,
            scope,
            records=config.records,
            ids=selection.ids if selection.mode != ALL else (),
            error_contains=selection.error if selection.mode == FILTERED else None,
            dry_run=not confirmed,
            now=config.now(),
            message_ids_only=True,  # the rows shown, never a job a sender named after one of them
            uncancel=self.cancelling.lifter() if confirmed and uncancel else None,
        )
        return {"selection": selection, "report": report, "nothing": not confirmed and not report.matched, **lifts}

    def _delete(self, scope: Scope, form: dict[str, list[str]], confirmed: bool) -> dict[str, Any]:
        ids = [i for i in form.get("ids", []) if i.strip()]
        if not ids:
            return {"ids": ids, "report": None, "nothing": True}
        if not confirmed:
            return {"ids": ids, "report": None, "nothing": False}
        # the messages shown, never a job a sender named after one of them
        report = delete(self.config.sqs, self.config.directory, scope, ids=ids, message_ids_only=True)
        return {"ids": ids, "report": report, "nothing": False}

    def _purge(self, scope: Scope, form: dict[str, list[str]], confirmed: bool) -> dict[str, Any]:
        report = purge(self.config.sqs, self.config.directory, scope) if confirmed else None
        return {"report": report, "nothing": False}


def _selection(form: dict[str, list[str]]) -> Selection:
    mode = _first(form, "mode") or ONE
    if mode not in (ONE, FILTERED, ALL):
        mode = ONE
    ids = tuple(i.strip() for i in form.get("ids", []) if i.strip())
    return Selection(mode, ids, _first(form, "reason"), _first(form, "error"))
