"""A job type's params schema: the shape of its params, checked at push and by the runner.

A type may declare ``params_schema`` in jobs.toml, a JSON Schema (draft 7; 4
and 6 by their ``$schema``) inline or in a JSON file beside the declaration.
The push SDK refuses params that do not match it, naming the job and the first
mismatch; the runner dead-letters such a body at its first delivery as poison,
with the same words, instead of running a job that would fail with a KeyError
until its attempts were used up; ``jobkit schema TYPE`` prints it, so a
producer in another language can check its params before sending.

The bookkeeping params (the root-job params, ``jobReleaseTimestamp`` and
``requestId``) are left out of the check: jobkit checks the root-job params
itself, and a schema need not mention them.

A schema is part of the deploy-time declaration, like a job's class path: it is
compiled into a validator when the declaration is loaded (fastjsonschema,
imported only then, so a runner whose types declare none imports nothing; a
runner, whose declaration was checked when its template was made, compiles
each schema when its first job needs it: :func:`schemas_checked_on_use`), and
it may refer only within itself (``$ref`` starting with ``#``), so checking
params never reaches the network. A validator never changes the params (no
``default`` is filled in). ``format`` is an annotation, not checked (JSON
Schema leaves its check optional, and some of fastjsonschema's format checks
take time that grows with the square of a hostile string's length): check a
shape with ``pattern``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from jobkit.core.errors import ConfigError, SpecError
from jobkit.declaration.options import TypeOption

#: Params jobkit or MediaWiki's conventions own, left out of a type's schema check.
BOOKKEEPING_PARAMS = ("rootJobSignature", "rootJobTimestamp", "rootJobIsSelf", "jobReleaseTimestamp", "requestId")

#: The drafts fastjsonschema implements; a schema without ``$schema`` is draft 7.
DRAFTS = frozenset(
    {
        "http://json-schema.org/draft-04/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-07/schema",
    }
)

#: What ``jobkit schema`` names as the draft of a schema that names none.
DEFAULT_DRAFT = "http://json-schema.org/draft-07/schema#"

#: A schema file or table larger than this is refused (it travels in the runner's environment).
MAX_SCHEMA_BYTES = 2048


class InvalidParams(SpecError):
    """A job's params do not match its type's declared ``params_schema``."""

    def __init__(self, job_type: str, job_id: str, mismatch: str) -> None:
        self.job_type = job_type
        self.mismatch = mismatch
        super().__init__(f"{job_type} {job_id}: params do not match the type's params_schema: {mismatch}")


class ParamsSchema:
    """A declared schema, with its validator compiled on first use.

    Attributes:
        document: the schema as declared (JSON).
    """

    __slots__ = ("_broken", "_validator", "document")

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document: dict[str, Any] = dict(document)
        self._validator: Callable[..., Any] | None = None
        self._broken: ValueError | None = None  # it did not compile: said once, not compiled again

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParamsSchema) and other.document == self.document

    def __hash__(self) -> int:
        return hash(canonical(self.document))

    def __repr__(self) -> str:
        return f"ParamsSchema({canonical(self.document)})"

    def mismatch(self, params: Mapping[str, Any]) -> str | None:
        """The first way ``params`` (less the bookkeeping params) fail the schema, or
        ``None``. Params the check cannot get through (a 400-digit number against a
        ``multipleOf``, nesting deeper than the interpreter's stack) fail it too.

        Raises:
            ValueError: the schema itself does not compile (a declaration that
                was never checked: see :func:`schemas_checked_on_use`).
        """
        from fastjsonschema import JsonSchemaValueException

        checked = {k: v for k, v in params.items() if k not in BOOKKEEPING_PARAMS}
        validator = self.validator()  # a schema that does not compile is no fault of the params
        try:
            validator(checked, name_prefix="params")
        except JsonSchemaValueException as exc:
            return _shortened(str(exc.message))
        except Exception as exc:  # OverflowError, RecursionError, ...: not params the job can take
            return _shortened(f"params cannot be checked against the schema ({type(exc).__name__}: {exc})")
        return None

    def check(self, job_type: str, job_id: str, params: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidParams` if ``params`` do not match; a
        :class:`ConfigError` if the schema itself does not compile (a declaration
        that was never checked: the job is retried, for a deploy that fixes it)."""
        try:
            problem = self.mismatch(params)
        except ValueError as exc:
            raise ConfigError(
                "the declaration", f"types.{job_type}.params_schema", f"{exc}: deploy a declaration whose schema does"
            ) from None
        if problem is not None:
            raise InvalidParams(job_type, job_id, problem)

    def validator(self) -> Callable[..., Any]:
        """The compiled validator (a :class:`ValueError` if the schema is not one)."""
        if self._validator is None:
            if self._broken is not None:
                raise self._broken
            import fastjsonschema

            try:
                self._validator = fastjsonschema.compile(
                    self.document, handlers={}, use_default=False, use_formats=False
                )
            except Exception as exc:  # whatever a schema makes the compiler raise (re.error, say)
                self._broken = ValueError(f"is not a valid JSON Schema: {exc}")
                raise self._broken from exc
        return self._validator


#: How much of a mismatch's text is kept: it may name param keys, which a producer chose.
MAX_MISMATCH_CHARS = 500


def _shortened(text: str) -> str:
    return text if len(text) <= MAX_MISMATCH_CHARS else text[: MAX_MISMATCH_CHARS - 1] + "…"


def canonical(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parse_params_schema(source: str, key: str, raw: Any, base_dir: Path | None) -> ParamsSchema:
    """A declared ``params_schema``: a table (the schema), or a path to a JSON
    file, relative to the declaration's directory. Refused with the file and key
    when it is not a JSON Schema fastjsonschema can compile, names a draft it does
    not implement, refers outside itself, or is larger than :data:`MAX_SCHEMA_BYTES`."""
    if isinstance(raw, str):
        path = (base_dir or Path(".")) / raw
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(source, key, f"cannot read {raw}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ConfigError(source, key, f"{raw} is not JSON: {exc}") from None
    elif isinstance(raw, Mapping):
        document = raw
    else:
        raise ConfigError(source, key, f"must be a table (the schema) or a path to a JSON file, got {raw!r}")
    if not isinstance(document, Mapping):
        raise ConfigError(source, key, "must be a JSON Schema object")
    try:
        text = canonical(document)
    except (TypeError, ValueError) as exc:  # a TOML date or time, say
        raise ConfigError(source, key, f"must be JSON: {exc}") from None
    if len(text.encode("utf-8")) > MAX_SCHEMA_BYTES:
        raise ConfigError(
            source,
            key,
            f"is {len(text.encode('utf-8'))} bytes, over the {MAX_SCHEMA_BYTES} a type's schema may have"
            " (it travels in the runner's environment): describe the params the job reads",
        )
    draft = document.get("$schema")
    if draft is not None and (not isinstance(draft, str) or draft.rstrip("#") not in DRAFTS):
        raise ConfigError(source, key, f"$schema must be JSON Schema draft 4, 6 or 7, got {draft!r}")
    outside = _outside_refs(document)
    if outside:
        raise ConfigError(source, key, f"may refer only within itself ($ref '#...'), got $ref {outside[0]!r}")
    required = document.get("required")
    named = [p for p in required if p in BOOKKEEPING_PARAMS] if isinstance(required, list) else []
    if named:
        raise ConfigError(
            source, key, f"may not require {named[0]!r}: the bookkeeping params are left out of the check"
        )
    schema = ParamsSchema(json.loads(json.dumps(document, ensure_ascii=False)))  # plain JSON, as declared
    if not _COMPILE_AT_LOAD.get():
        return schema
    try:
        validator = schema.validator()
    except ValueError as exc:
        raise ConfigError(source, key, str(exc)) from None
    try:
        validator({}, name_prefix="params")
    except RecursionError:
        raise ConfigError(source, key, "refers to itself ($ref) without ever checking a value") from None
    except Exception:  # {} may well fail the schema: that is no problem of the schema
        pass
    return schema


#: Whether a schema is compiled as its declaration loads (to refuse one that does not compile).
_COMPILE_AT_LOAD: ContextVar[bool] = ContextVar("jobkit_compile_schemas_at_load", default=True)


@contextlib.contextmanager
def schemas_checked_on_use() -> Iterator[None]:
    """Declarations loaded in here compile each schema on its first use, not as
    they load: for a declaration checked when it was written out (a runner's, from
    its environment), whose cold start then compiles only the schemas its jobs use.
    A schema that does not compile then fails each check with a :class:`ConfigError`
    that names it: the runner retries such a job (a deploy may fix the schema),
    and dead-letters it with that reason on its last receive."""
    token = _COMPILE_AT_LOAD.set(False)
    try:
        yield
    finally:
        _COMPILE_AT_LOAD.reset(token)


def _outside_refs(node: Any) -> list[Any]:
    if isinstance(node, Mapping):
        found = [node["$ref"]] if "$ref" in node and not str(node["$ref"]).startswith("#") else []
        return found + [ref for value in node.values() for ref in _outside_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _outside_refs(value)]
    return []


PARAMS_OPTIONS = (
    TypeOption(
        "params_schema",
        None,
        lambda where, raw: parse_params_schema(where.source, where.key, raw, where.base_dir),
        "=",
        "the shape of its params: a JSON Schema (draft 7), inline or a path to a JSON file relative to this"
        " file; checked at push and by the runner, which dead-letters a mismatch at once (`jobkit schema"
        " NAME` prints it)",
        to_toml=lambda schema: schema.document if schema is not None else None,
        in_defaults=False,
    ),
)
