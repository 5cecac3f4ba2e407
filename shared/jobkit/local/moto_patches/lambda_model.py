"""Lambda's control plane as the local stack deploys it from a template.

The local stack runs the runners itself (:mod:`jobkit.local.esm`), so moto
must never invoke a function. But what a deployed stack shows through the
Lambda API should be there for the tools that read it (``jobkit verify``):

- **Recursive loop detection.** moto has no ``GetFunctionRecursionConfig``
  nor ``PutFunctionRecursionConfig``; they are added, with Lambda's default
  (``Terminate``), and a function created from a template takes its
  ``RecursiveLoop`` property.
- **Event source mappings** stay as the template made them (enabled, their
  batch size, scaling and response types); only moto's own trigger, which
  would run the function in Docker when a message arrives, is taken off the
  queue (:func:`detach_triggers`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

DEFAULT_RECURSIVE_LOOP = "Terminate"
_ROUTE = r"{0}/(?P<api_version>[^/]+)/functions/(?P<function_name>[\w_:%-]+)/recursion-config/?$"


@contextlib.contextmanager
def lambda_control_plane() -> Iterator[None]:
    urls: Any = importlib.import_module("moto.awslambda.urls")
    responses: Any = importlib.import_module("moto.awslambda.responses").LambdaResponse
    function_class: Any = importlib.import_module("moto.awslambda.models").LambdaFunction
    original_create = function_class.create_from_cloudformation_json.__func__
    original_descriptor = function_class.__dict__.get("create_from_cloudformation_json")

    def function_name(response: Any) -> str:
        return unquote(response.path.rstrip("/").rsplit("/", 2)[-2])

    def get_function_recursion_config(self: Any) -> tuple[int, dict[str, str], str]:
        function = self.backend.get_function(function_name(self))
        setting = getattr(function, "jobkit_recursive_loop", DEFAULT_RECURSIVE_LOOP)
        return 200, {}, json.dumps({"RecursiveLoop": setting})

    def put_function_recursion_config(self: Any) -> tuple[int, dict[str, str], str]:
        function = self.backend.get_function(function_name(self))
        function.jobkit_recursive_loop = self._get_param("RecursiveLoop")
        return 200, {}, json.dumps({"RecursiveLoop": function.jobkit_recursive_loop})

    def create_from_cloudformation_json(
        cls: Any, resource_name: str, cloudformation_json: Any, *args: Any, **kw: Any
    ) -> Any:
        function = original_create(cls, resource_name, cloudformation_json, *args, **kw)
        setting = cloudformation_json.get("Properties", {}).get("RecursiveLoop", DEFAULT_RECURSIVE_LOOP)
        function.jobkit_recursive_loop = setting
        return function

    # Stacks nest (a test's stack inside another's): each restores what it found.
    added = ("get_function_recursion_config", "put_function_recursion_config")
    found = {name: responses.__dict__.get(name) for name in added}
    had_route = _ROUTE in urls.url_paths
    urls.url_paths[_ROUTE] = responses.dispatch
    responses.get_function_recursion_config = get_function_recursion_config
    responses.put_function_recursion_config = put_function_recursion_config
    function_class.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)
    try:
        yield
    finally:
        if not had_route:
            urls.url_paths.pop(_ROUTE, None)
        for name, before in found.items():
            if before is None:
                delattr(responses, name)
            else:
                setattr(responses, name, before)
        if original_descriptor is None:  # inherited: the class had none of its own
            del function_class.create_from_cloudformation_json
        else:
            function_class.create_from_cloudformation_json = original_descriptor


def recursion_setting(function_name: str, account_id: str, region: str) -> str:
    """The deployed function's ``RecursiveLoop`` now (as its last
    ``PutFunctionRecursionConfig`` or its template left it)."""
    backends: Any = importlib.import_module("moto.awslambda.models").lambda_backends
    function = backends[account_id][region].get_function(function_name)
    return str(getattr(function, "jobkit_recursive_loop", DEFAULT_RECURSIVE_LOOP))


def detach_triggers() -> None:
    """Take moto's own event source mapping triggers off every queue: the
    mappings stay as deployed, and the local stack's emulator polls instead."""
    backends: Any = importlib.import_module("moto.sqs.models").sqs_backends
    for account in backends.values():
        for backend in account.values():
            for queue in backend.queues.values():
                queue.lambda_event_source_mappings.clear()
