"""The ``jobkit ui`` application: routes, templates, static files and the guards around them.

Built from a :class:`~jobkit.ops.config.CliConfig`, the same composition root
as every ops command (so the same ``--prefix``, ``--endpoint-url`` and
``--config`` mean the same stack), and :class:`~jobkit.ui.settings.UiSettings`.
Tests drive it with Starlette's ``TestClient``; ``jobkit ui`` serves it with
uvicorn (:mod:`jobkit.ui.server`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from jobkit.core.errors import JobKitError, UnknownJobType
from jobkit.ui.access import TokenGate
from jobkit.ui.actions import Actions
from jobkit.ui.csrf import FIELD, CsrfGuard
from jobkit.ui.headers import SecurityHeaders
from jobkit.ui.history import HistoryCache, last_hour
from jobkit.ui.pages import Pages
from jobkit.ui.settings import UiSettings
from jobkit.ui.sparkline import sparkline

if TYPE_CHECKING:
    from jobkit.ops.config import CliConfig


def templates(settings: UiSettings, csrf: CsrfGuard, stack: str) -> Jinja2Templates:
    """The package's templates, autoescaped, with the ops views' formats as filters."""
    from jobkit.ops import views
    from jobkit.ops.top import FINAL_OUTCOME_METRICS

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("jobkit.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        duration=views.duration,
        milliseconds=views.milliseconds,
        rate=views.rate,
        timestamp=views.timestamp,
        count=lambda value: f"{value:,}",
    )
    env.globals.update(
        sparkline=sparkline,
        allow_actions=settings.allow_actions,
        csrf_field=FIELD,
        csrf_token=csrf.token,
        interval_ms=int(settings.interval_s * 1000),
        missing=views.MISSING,
        final_outcomes=FINAL_OUTCOME_METRICS,
        stack=stack,
    )
    return Jinja2Templates(env=env)


def create_app(config: CliConfig, settings: UiSettings, *, csrf: CsrfGuard | None = None) -> Starlette:
    """The application. Its AWS clients and declaration are built here, once,
    so the pages (run in a thread pool) share them and never build them concurrently."""
    _ = (config.declaration, config.sqs, config.cloudwatch, config.directory, config.records)
    csrf = csrf or CsrfGuard()
    pages_templates = templates(settings, csrf, config.declaration.prefix)
    history = HistoryCache(lambda now: last_hour(config.cloudwatch, config.declaration, now=now))
    pages = Pages(config, settings, pages_templates, history)
    actions = Actions(config, settings, pages_templates, csrf)

    def error_page(request: Request, message: str, status_code: int) -> Response:
        return pages_templates.TemplateResponse(request, "error.html", {"message": message}, status_code=status_code)

    async def unknown_type(request: Request, exc: Exception) -> Response:
        return error_page(request, str(exc), 404)

    async def jobkit_error(request: Request, exc: Exception) -> Response:
        return error_page(request, str(exc), 400)

    async def aws_error(request: Request, exc: Exception) -> Response:
        return error_page(request, f"AWS: {type(exc).__name__}: {exc}", 502)

    from botocore.exceptions import BotoCoreError, ClientError

    handlers: dict[Any, Any] = {
        UnknownJobType: unknown_type,
        JobKitError: jobkit_error,
        ClientError: aws_error,
        BotoCoreError: aws_error,
    }
    routes = [
        Route("/", pages.overview_page, methods=["GET"]),
        Route("/overview/rows", pages.overview_rows, methods=["GET"]),
        Route("/types/{name}", pages.type_page, methods=["GET"]),
        Route("/types/{name}/job", pages.job_page, methods=["GET"]),
        Route("/batch", pages.batch_page, methods=["GET"]),
        Route("/types/{name}/redrive", actions.redrive, methods=["POST"]),
        Route("/types/{name}/delete", actions.delete, methods=["POST"]),
        Route("/types/{name}/purge", actions.purge, methods=["POST"]),
        Route("/types/{name}/cancel", actions.cancel, methods=["POST"]),
        Route("/types/{name}/cancel-all", actions.cancel_all, methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("jobkit.ui", "static")]), name="static"),
    ]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(TokenGate, token=settings.token, loopback=settings.loopback),
    ]
    return Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
