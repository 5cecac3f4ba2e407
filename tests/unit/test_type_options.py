"""The keys of [types.NAME]: each declared once, by its feature, and documented from there."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from jobkit.declaration.config import TYPE_OPTIONS, JobType, declaration_to_dict, load_declaration, parse_declaration
from jobkit.declaration.options import TypeOption, Where, reference, rewrite_reference
from jobkit.scaffold import plan

ROOT = Path(__file__).resolve().parents[2]


def test_every_field_of_a_job_type_is_one_declared_key() -> None:
    keys = [option.key for option in TYPE_OPTIONS]
    assert len(keys) == len(set(keys))
    fields = {f.name for f in dataclasses.fields(JobType)} - {"name"}
    assert sorted(option.attribute for option in TYPE_OPTIONS) == sorted(fields)


def test_the_example_apps_reference_is_generated_from_the_declared_keys() -> None:
    text = (ROOT / "infra" / "jobs.toml").read_text()
    assert reference(TYPE_OPTIONS) in text, (
        "infra/jobs.toml's reference of the type keys is stale: run `make reference`"
    )
    for option in TYPE_OPTIONS:
        assert f"#   {option.key} " in text


def test_a_scaffolded_apps_reference_is_generated_too(tmp_path: Path) -> None:
    scaffold = plan(tmp_path, package="myjobs")
    [declaration] = [text for path, text in scaffold.files.items() if path.name == "jobs.toml"]
    assert reference(TYPE_OPTIONS) in declaration + "\n"


def test_a_new_key_shows_in_the_reference_and_the_rewrite_puts_it_in() -> None:
    extra = TypeOption("cost_center", None, lambda where, raw: raw, "= none", "who pays for this type's runs")
    block = reference((*TYPE_OPTIONS, extra))
    assert "#   cost_center      = none   who pays for this type's runs" in block
    text = (ROOT / "infra" / "jobs.toml").read_text()
    assert block not in text
    rewritten = rewrite_reference(text, block)
    assert block in rewritten and rewritten.count("#   class ") == 1
    assert rewritten.split(block)[1] == text.split(reference(TYPE_OPTIONS))[1]  # what follows is kept


@pytest.mark.parametrize("path", ["infra/jobs.toml", "tests/fixtures/jobs.toml", "tests/fixtures/flow.toml"])
def test_a_functions_declaration_leaves_out_defaults_and_reads_back_the_same(path: str) -> None:
    declaration = load_declaration(ROOT / path)
    for queue in declaration.queues.values():
        own = set(queue.types)
        full = declaration_to_dict(declaration, only_types=own)
        lean = declaration_to_dict(declaration, only_types=own, defaults=False)
        assert len(str(lean)) < len(str(full))
        assert parse_declaration(lean, source="lean").types == parse_declaration(full, source="full").types
        for name, keys in lean["types"].items():
            job_type = declaration.types[name]
            left_out = [o for o in TYPE_OPTIONS if o.key not in keys and o.key != "pushes"]
            assert [o.key for o in left_out if getattr(job_type, o.attribute) != o.default_for(name)] == []
            assert keys.get("pushes", []) == [t for t in job_type.pushes if t in own]  # the function's own


def test_an_option_names_its_key_in_an_error() -> None:
    option = next(o for o in TYPE_OPTIONS if o.key == "timeout_s")
    with pytest.raises(Exception, match=r"types\.t\.timeout_s: must be an integer from 1 to 900"):
        option.read(Where("jobs.toml", "types.t"), {"timeout_s": 901}, "t")
