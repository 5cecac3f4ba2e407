"""The README's forms for pushing lazily from a web app, each in its framework:
Flask, Django, and Starlette (and so FastAPI, which is Starlette). In each, a
view's lazy job is pushed once the response is out, and the app stays what its
framework's tools look for (``flask run`` finds a Flask object; ``uvicorn`` and
``fastapi run`` an ASGI app)."""

from __future__ import annotations

import types
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from asgi_client import serve_one

from jobkit import JobSpecification
from jobkit.local import LocalStack


def pushed(stack: LocalStack) -> list[dict[str, Any]]:
    import json

    url = stack.queue_urls["test-noop"]
    messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"])["params"] for m in messages]


def test_flask_keeps_its_app_and_pushes_after_the_response(stack: LocalStack) -> None:
    from flask import Flask
    from flask.cli import find_best_app

    group = stack.queue_group()
    app = Flask("shop")

    @app.post("/signup")
    def signup() -> str:
        group.lazy_push(JobSpecification("noop", {"path": "/signup"}))
        assert pushed(stack) == []  # not before the response
        return "welcome"

    # The README's form: the middleware wraps Flask's WSGI app, not the Flask object.
    app.wsgi_app = group.wsgi_middleware(app.wsgi_app)  # type: ignore[method-assign]
    response = app.test_client().post("/signup")
    assert (response.status_code, response.data) == (200, b"welcome")
    response.close()  # what the server does once the body is out
    assert pushed(stack) == [{"path": "/signup"}]
    # `flask run` finds the app in the module; wrapping the object itself hides it.
    module = types.ModuleType("shop")
    module.app = app  # type: ignore[attr-defined]
    assert find_best_app(module) is app
    module.app = group.wsgi_middleware(app)  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="Failed to find Flask application"):
        find_best_app(module)


def test_django_wsgi_application_pushes_after_the_response(stack: LocalStack) -> None:
    import django
    from django.conf import settings
    from django.http import HttpRequest, HttpResponse
    from django.urls import path

    group = stack.queue_group()

    def signup(request: HttpRequest) -> HttpResponse:
        group.lazy_push(JobSpecification("noop", {"path": request.path}))
        return HttpResponse(b"welcome")

    urls = types.ModuleType("shop_urls")
    urls.urlpatterns = [path("signup", signup)]  # type: ignore[attr-defined]
    import sys

    sys.modules["shop_urls"] = urls
    if not settings.configured:
        settings.configure(ROOT_URLCONF="shop_urls", ALLOWED_HOSTS=["*"], SECRET_KEY="test", MIDDLEWARE=[])
    django.setup()
    from django.core.wsgi import get_wsgi_application

    # The README's form, in the project's wsgi.py:
    application = group.wsgi_middleware(get_wsgi_application())
    environ: dict[str, Any] = {"PATH_INFO": "/signup", "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    started: list[str] = []
    body = application(environ, lambda status, headers, *exc: started.append(status))
    assert b"".join(body) == b"welcome" and started == ["200 OK"]
    assert pushed(stack) == []  # the body is out; the server has not closed it yet
    body.close()  # type: ignore[attr-defined]
    assert pushed(stack) == [{"path": "/signup"}]


def test_starlette_add_middleware_keeps_the_app_and_pushes_after_the_response(stack: LocalStack) -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    group = stack.queue_group()

    async def signup(request: Request) -> PlainTextResponse:
        group.lazy_push(JobSpecification("noop", {"path": request.url.path}))
        return PlainTextResponse("welcome")

    app = Starlette(routes=[Route("/signup", signup, methods=["POST"])])
    # The README's form (FastAPI's is the same): the app stays a Starlette (FastAPI) object.
    app.add_middleware(group.asgi_middleware)  # type: ignore[arg-type]
    assert isinstance(app, Starlette)
    assert serve_one(app, "POST", "/signup") == (200, b"welcome")
    assert pushed(stack) == [{"path": "/signup"}]
