"""A params schema derived from a job class's ``Params`` TypedDict."""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired, Required, TypedDict

import pytest
from click.testing import CliRunner

from jobkit import Job
from jobkit.cli.commands import main
from jobkit.core.params_types import NoParamsType, schema_of_class
from jobkit.declaration.config import parse_declaration

from conftest import ROOT


class Page(TypedDict):
    title: str
    namespace: int


class Options(TypedDict, total=False):
    dry_run: bool
    reason: Required[str]


class ImportJob(Job):
    class Params(TypedDict):
        source: str
        pages: list[Page]
        weights: dict[str, float]
        mode: Literal["full", "delta"]
        since: float | None
        pair: tuple[int, str]
        options: NotRequired[Options]
        extra: NotRequired[Any]


def test_a_params_typeddict_becomes_a_schema_that_push_and_the_runner_check() -> None:
    schema = schema_of_class(ImportJob)
    assert schema["required"] == ["mode", "pages", "pair", "since", "source", "weights"]
    assert schema["properties"]["pages"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "namespace": {"type": "integer"}},
            "required": ["namespace", "title"],
            "additionalProperties": False,
        },
    }
    assert schema["properties"]["options"]["required"] == ["reason"]  # total=False, but Required
    assert schema["properties"]["since"] == {"anyOf": [{"type": "number"}, {"type": "null"}]}
    # and the declaration takes it as it is
    raw = {"types": {"import": {"class": "jobs:ImportJob", "params_schema": schema}}}
    typed = parse_declaration(raw, source="jobs.toml").types["import"]
    good = {"source": "s3://b/k", "pages": [{"title": "P", "namespace": 0}], "weights": {"a": 1.5},
            "mode": "delta", "since": None, "pair": [1, "x"], "extra": {"anything": [1]}}  # fmt: skip
    typed.check_params("j1", good)
    assert typed.params_schema is not None
    assert typed.params_schema.mismatch({**good, "mode": "partial"}) == "params.mode must be one of ['full', 'delta']"
    assert typed.params_schema.mismatch({**good, "typo": 1}) == "params must not contain {'typo'} properties"


class NoParams(Job):
    pass


class Unexpressible(Job):
    class Params(TypedDict):
        when: Job


@pytest.mark.parametrize(
    ("job_class", "problem"),
    [
        (NoParams, "NoParams has no Params TypedDict"),
        (Unexpressible, "params.when: <class 'jobkit.jobs.job.Job'> has no"),
    ],
)
def test_a_class_without_an_expressible_params_typeddict_is_an_error(job_class: type, problem: str) -> None:
    with pytest.raises(NoParamsType, match=problem.replace("(", r"\(").replace(".", r"\.")):
        schema_of_class(job_class)


def test_jobkit_schema_from_class_prints_the_example_jobs_schema() -> None:
    config = str(ROOT / "infra" / "jobs.toml")
    result = CliRunner().invoke(main, ["schema", "--config", config, "--from-class", "refreshLinks"])
    assert result.exit_code == 0, result.output
    derived: dict[str, Any] = json.loads(result.stdout)
    declared = json.loads((ROOT / "infra" / "schemas" / "refreshLinks.json").read_text())
    # the same params as the declared file, which also admits params the job does not read
    assert set(derived["properties"]) == set(declared["properties"])
    assert derived["required"] == declared["required"] == ["title"]
    missing = CliRunner().invoke(main, ["schema", "--config", config, "--from-class", "enotifNotify"])
    assert missing.exit_code == 1 and "has no Params TypedDict" in missing.output
