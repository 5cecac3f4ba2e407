"""A type's declared params schema: what the declaration refuses, and what a check reports."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from jobkit.core.errors import ConfigError
from jobkit.declaration.config import declaration_to_dict, parse_declaration
from jobkit.declaration.params_schema import MAX_SCHEMA_BYTES, InvalidParams

SCHEMA = {
    "type": "object",
    "required": ["title"],
    "properties": {"title": {"type": "string"}, "count": {"type": "integer", "default": 3}},
    "additionalProperties": False,
}


def declare(schema: Any, base_dir: Path | None = None) -> Any:
    raw = {"types": {"typed": {"class": "jobs:TypedJob", "params_schema": schema}}}
    return parse_declaration(raw, source="jobs.toml", base_dir=base_dir).types["typed"]


def refusal(schema: Any, base_dir: Path | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        declare(schema, base_dir)
    assert caught.value.key == "types.typed.params_schema"
    return caught.value.problem


def test_params_that_match_pass_and_the_first_mismatch_is_named() -> None:
    typed = declare(SCHEMA)
    typed.check_params("j1", {"title": "Paris"})
    with pytest.raises(InvalidParams) as caught:
        typed.check_params("j1", {"title": 7})
    assert str(caught.value) == "typed j1: params do not match the type's params_schema: params.title must be string"
    assert typed.params_schema.mismatch({}) == "params must contain ['title'] properties"


def test_the_bookkeeping_params_are_left_out_of_the_check() -> None:
    typed = declare(SCHEMA)  # additionalProperties: false, and no root params named
    root = {"rootJobSignature": "a" * 40, "rootJobTimestamp": 1.0, "rootJobIsSelf": True}
    typed.check_params("j1", {"title": "Paris", **root, "requestId": "r", "jobReleaseTimestamp": 2})


def test_a_check_never_changes_the_params() -> None:
    params = {"title": "Paris"}
    declare(SCHEMA).check_params("j1", params)
    assert params == {"title": "Paris"}  # no default filled in: the dedup hash stays the producer's


def test_true_is_not_an_integer() -> None:
    assert declare(SCHEMA).params_schema.mismatch({"title": "x", "count": True}) == "params.count must be integer"


def test_a_type_without_a_schema_takes_any_params() -> None:
    raw = {"types": {"plain": {"class": "jobs:Plain"}}}
    plain = parse_declaration(raw, source="jobs.toml").types["plain"]
    assert plain.params_schema is None
    plain.check_params("j1", {"anything": [1, {"at": "all"}]})


def test_a_schema_file_is_read_beside_the_declaration(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "typed.json").write_text(json.dumps(SCHEMA))
    assert declare("schemas/typed.json", tmp_path).params_schema.document == SCHEMA


def test_the_schema_travels_inline_in_a_runners_declaration(tmp_path: Path) -> None:
    (tmp_path / "typed.json").write_text(json.dumps(SCHEMA))
    raw = {"types": {"typed": {"class": "jobs:TypedJob", "params_schema": "typed.json"}}}
    declaration = parse_declaration(raw, source="jobs.toml", base_dir=tmp_path)
    as_json = json.loads(json.dumps(declaration_to_dict(declaration)))
    assert as_json["types"]["typed"]["params_schema"] == SCHEMA
    again = parse_declaration(as_json, source="$JOBKIT_DECLARATION")  # no directory: nothing to read
    assert again.types["typed"].params_schema == declaration.types["typed"].params_schema


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (7, "must be a table (the schema) or a path to a JSON file, got 7"),
        ({"type": "strng"}, "is not a valid JSON Schema: Unknown type"),
        ({"type": "string", "pattern": "(a"}, "is not a valid JSON Schema: missing ), unterminated subpattern"),
        (
            {"$schema": "https://json-schema.org/draft/2020-12/schema"},
            "$schema must be JSON Schema draft 4, 6 or 7, got 'https://json-schema.org/draft/2020-12/schema'",
        ),
        (
            {"properties": {"a": {"$ref": "https://example.com/a.json"}}},
            "may refer only within itself ($ref '#...'), got $ref 'https://example.com/a.json'",
        ),
        ({"const": datetime.date(2026, 1, 1)}, "must be JSON"),
        ({"enum": [f"value-{n}" for n in range(300)]}, f"over the {MAX_SCHEMA_BYTES} a type's schema may have"),
    ],
)
def test_a_schema_that_cannot_be_checked_as_declared_is_refused_at_load(schema: Any, problem: str) -> None:
    assert problem in refusal(schema)


def test_an_unreadable_schema_file_is_refused_at_load(tmp_path: Path) -> None:
    assert refusal("missing.json", tmp_path).startswith("cannot read missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    assert refusal("bad.json", tmp_path).startswith("bad.json is not JSON")
    (tmp_path / "list.json").write_text("[]")
    assert refusal("list.json", tmp_path) == "must be a JSON Schema object"


def test_a_schema_is_a_types_own_not_a_default() -> None:
    raw = {"defaults": {"params_schema": SCHEMA}, "types": {"typed": {"class": "jobs:TypedJob"}}}
    with pytest.raises(ConfigError, match=r"defaults\.params_schema: unknown key"):
        parse_declaration(raw, source="jobs.toml")


def test_a_schema_that_loops_on_itself_or_requires_a_bookkeeping_param_is_refused() -> None:
    assert refusal({"$ref": "#"}) == "refers to itself ($ref) without ever checking a value"
    assert refusal({"required": ["title", "rootJobTimestamp"]}) == (
        "may not require 'rootJobTimestamp': the bookkeeping params are left out of the check"
    )
    # a schema that recurses only into nested values is fine
    declare({"type": "object", "properties": {"child": {"$ref": "#"}}}).check_params("j1", {"child": {"child": {}}})


def test_params_the_check_cannot_get_through_fail_it_with_a_reason() -> None:
    typed = declare({"properties": {"ratio": {"type": "number", "multipleOf": 0.1}}})
    problem = typed.params_schema.mismatch({"ratio": 10**400})  # valid JSON, too big for a float
    assert problem == "params cannot be checked against the schema (OverflowError: int too large to convert to float)"
    with pytest.raises(InvalidParams):
        typed.check_params("j1", {"ratio": 10**400})


def test_format_is_an_annotation_and_a_mismatch_text_is_bounded() -> None:
    emails = declare({"properties": {"to": {"type": "string", "format": "email"}}})
    emails.check_params("j1", {"to": "a" + "." * 200_000})  # not checked: no quadratic regex on hostile text
    strict = declare({"type": "object", "additionalProperties": False})
    problem = strict.params_schema.mismatch({"k" * 10_000: 1})
    assert problem is not None and len(problem) == 500 and problem.endswith("…")


def test_a_runners_declaration_compiles_a_schema_when_its_first_job_needs_it() -> None:
    # A runner's cold start: its declaration comes from its environment, checked when the
    # template was made, and a schema is compiled for the first job of its type
    from jobkit.declaration.config import declaration_from_environment

    raw = {"types": {"typed": {"class": "jobs:TypedJob", "params_schema": SCHEMA}}}
    environ = {"JOBKIT_DECLARATION": json.dumps(raw)}
    schema = declaration_from_environment(environ).types["typed"].params_schema
    assert schema is not None and schema._validator is None
    with pytest.raises(InvalidParams, match="params must not contain"):
        schema.check("typed", "j1", {"title": "Paris", "colour": "red"})
    assert schema._validator is not None
    # and one that does not compile is no fault of the params: a ConfigError that names it
    # (the runner retries the job, for a deploy that fixes the schema), compiled once
    broken = {"types": {"typed": {"class": "jobs:TypedJob", "params_schema": {"type": "strng"}}}}
    broken_schema = declaration_from_environment({"JOBKIT_DECLARATION": json.dumps(broken)}).types["typed"]
    assert broken_schema.params_schema is not None
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"types\.typed\.params_schema: is not a valid JSON Schema"):
            broken_schema.params_schema.check("typed", "j1", {"title": "Paris"})
    # a declaration loaded from its file still refuses it at once
    assert refusal({"type": "strng"}).startswith("is not a valid JSON Schema")
