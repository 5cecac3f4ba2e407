"""A params schema derived from a job class: its ``Params`` TypedDict, as JSON Schema.

A job class may describe its params with type hints::

    class RefreshLinksJob(Job):
        class Params(TypedDict):
            title: str
            causeAction: NotRequired[str]

        def run(self) -> bool: ...

``jobkit schema refreshLinks --from-class`` prints the JSON Schema of that
TypedDict, to save as the type's ``params_schema`` file. The declaration stays
the one source that push, the runner and other languages' producers check
against; this only saves writing the schema by hand. A hint it cannot express
(a class, a callable) is an error naming the param, never a schema that lets
anything through.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from jobkit.core.errors import JobKitError

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}


class NoParamsType(JobKitError):
    """The job class has no ``Params`` TypedDict, or one that JSON Schema cannot express."""


def schema_of_class(job_class: type) -> dict[str, Any]:
    """The JSON Schema (draft 7) of ``job_class.Params``."""
    params = getattr(job_class, "Params", None)
    if params is None or not is_typeddict(params):
        raise NoParamsType(
            f"{job_class.__qualname__} has no Params TypedDict: declare `class Params(TypedDict): ...` in it,"
            " or write the schema by hand"
        )
    return {"$schema": "http://json-schema.org/draft-07/schema#", **_typed_dict(params, "params")}


def _typed_dict(cls: Any, where: str) -> dict[str, Any]:
    hints = get_type_hints(cls, include_extras=True)
    # From the hints, not __required_keys__: with `from __future__ import annotations`
    # Python 3.11 cannot see NotRequired in a string annotation when it makes the class.
    total = getattr(cls, "__total__", True)
    required = sorted(
        name
        for name, hint in hints.items()
        if get_origin(hint) is Required or (total and get_origin(hint) is not NotRequired)
    )
    return {
        "type": "object",
        "properties": {name: _schema(hint, f"{where}.{name}") for name, hint in hints.items()},
        "required": required,
        "additionalProperties": False,
    }


def _schema(hint: Any, where: str) -> dict[str, Any]:
    origin = get_origin(hint)
    if origin in (Required, NotRequired, typing.Annotated):
        return _schema(get_args(hint)[0], where)
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    if is_typeddict(hint):
        return _typed_dict(hint, where)
    if origin is Literal:
        return {"enum": list(get_args(hint))}
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema(arg, where) for arg in get_args(hint)]}
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        args = get_args(hint)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            args = args[:1]
        if origin is tuple and args and args[-1] is not Ellipsis and len(args) > 1:
            items = [_schema(arg, f"{where}[{n}]") for n, arg in enumerate(args)]
            return {"type": "array", "items": items, "minItems": len(items), "maxItems": len(items)}
        return {"type": "array", **({"items": _schema(args[0], f"{where}[]")} if args else {})}
    if origin is dict or hint is dict:
        args = get_args(hint)
        if args and args[0] is not str:
            raise NoParamsType(f"{where}: JSON object keys are strings, not {args[0]!r}")
        return {"type": "object", **({"additionalProperties": _schema(args[1], f"{where}{{}}")} if args else {})}
    raise NoParamsType(f"{where}: {hint!r} has no JSON Schema (use str, int, float, bool, list, dict, a TypedDict...)")
