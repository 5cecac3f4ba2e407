"""A declaration of MediaWiki's size deploys: 120 job types on 120 queues.

CloudFormation takes at most 500 resources, 200 outputs, 200 parameters and a
template of 1 MB per stack; one queue costs about a dozen resources once SAM
has transformed the template, so 50 queues in one stack are already too many.
Past 30 queues, `jobkit template` puts the queues into nested stacks (a hash
of each queue's name picks its stack). Each template it writes transforms,
lints clean and stays under every limit, and the local stack deploys them
(moto's CloudFormation, nested stacks included) and runs jobs across them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chainjobs
import pytest
from cfnlint.api import ManualArgs, lint
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli import main
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, load_declaration, parse_declaration
from jobkit.local import LocalStack
from jobkit.local.cloudformation import load_template, translate
from jobkit.template import build_all
from jobkit.template.naming import QueueIds
from jobkit.template.stacks import BUCKETS, bucket

from conftest import START

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TYPES = 120
CHILD_PARAMETERS = {
    "Prefix": "jobkit",
    "LayerArn": "arn:aws:lambda:us-east-1:123456789012:layer:jobkit:1",
    "JobsTableArn": "arn:aws:dynamodb:us-east-1:123456789012:table/jobkit-jobs",
}


def big_declaration_toml() -> str:
    """120 types, each on its own queue; each pushes the next one (across stacks)."""
    lines = ["[jobkit]", 'prefix = "big"', f'code_dir = "{FIXTURES}"', ""]
    for n in range(TYPES):
        lines += [
            f"[types.jobType{n:03d}]",
            'class = "chainjobs:EchoJob"',
            f'pushes = ["jobType{(n + 1) % TYPES:03d}"]',
            "",
        ]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`jobkit template` run on the 120-type declaration: the directory it wrote."""
    directory = tmp_path_factory.mktemp("big")
    (directory / "jobs.toml").write_text(big_declaration_toml())
    result = CliRunner().invoke(
        main, ["template", "--config", str(directory / "jobs.toml"), "--output", str(directory / "template.yaml")]
    )
    assert result.exit_code == 0, result.output
    return directory


def test_a_120_type_declaration_is_split_into_nested_stacks_each_within_cloudformations_limits(written: Path) -> None:
    children = sorted(written.glob("template.queues-*.yaml"))
    assert len(children) == BUCKETS
    root = translate(load_template(written / "template.yaml"), parameters={"Prefix": "jobkit"})
    stacks = [r for r in root["Resources"].values() if r["Type"] == "AWS::CloudFormation::Stack"]
    assert len(stacks) == BUCKETS
    templates = {"template.yaml": root}
    for child in children:
        templates[child.name] = translate(load_template(child), parameters=CHILD_PARAMETERS)
    functions = 0
    for name, template in templates.items():
        text = json.dumps(template)
        assert len(template["Resources"]) <= 500, name
        assert len(template.get("Outputs", {})) <= 200, name
        assert len(template.get("Parameters", {})) <= 200, name
        assert len(text.encode()) <= 1_000_000 and len((written / name).read_bytes()) <= 1_000_000, name
        functions += sum(1 for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    assert functions == TYPES  # every runner, once (the big declaration has no push endpoint)


def packaged(path: Path) -> dict[str, Any]:
    """A template as `sam package` leaves it: nested stacks' locations are S3 URLs."""
    template = load_template(path)
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Application":
            location = resource["Properties"]["Location"]
            resource["Properties"]["Location"] = f"https://s3.amazonaws.com/artifacts/{location}"
    return template


def test_every_template_lints_clean_once_packaged_and_transformed(written: Path) -> None:
    lint_config = ManualArgs(regions=["us-east-1"])
    for path in [written / "template.yaml", *sorted(written.glob("template.queues-*.yaml"))[:2]]:
        parameters = {"Prefix": "jobkit"} if path.name == "template.yaml" else CHILD_PARAMETERS
        matches = lint(json.dumps(translate(packaged(path), parameters=parameters)), config=lint_config)
        assert [str(m) for m in matches] == [], path.name


def test_the_check_passes_on_what_template_wrote_and_fails_when_a_nested_file_is_stale(written: Path) -> None:
    args = ["template", "--config", str(written / "jobs.toml"), "--output", str(written / "template.yaml"), "--check"]
    # (the classes import from code_dir: the check imports them as the runner would)
    assert CliRunner().invoke(main, args).exit_code == 0
    child = written / "template.queues-3.yaml"
    text = child.read_text()
    child.write_text(text + "\n# edited\n")
    try:
        result = CliRunner().invoke(main, args)
        assert result.exit_code != 0 and "template.queues-3.yaml" in result.output
    finally:
        child.write_text(text)


def test_a_queue_stays_in_its_stack_when_other_queues_come_and_go() -> None:
    # The stack is a hash of the queue's own name: adding queues never moves one
    assert bucket("jobType007") == bucket("jobType007")
    types = {f"jobType{n:03d}": {"class": "m:C"} for n in range(40)}
    before = build_all(parse_declaration({"types": types}, source="t"))
    after = build_all(parse_declaration({"types": {**types, "aNewType": {"class": "m:C"}}}, source="t"))
    for name, template in before.items():
        if name != "template.yaml":
            assert set(template["Resources"]) <= set(after[name]["Resources"]), name


def test_a_runner_names_a_queue_of_another_stack_by_its_name() -> None:
    types = {f"jobType{n:03d}": {"class": "m:C", "pushes": [f"jobType{(n + 1) % 40:03d}"]} for n in range(40)}
    declaration = parse_declaration({"types": types}, source="t")
    templates = build_all(declaration)
    pusher, target = "jobType000", "jobType001"
    assert bucket(pusher) != bucket(target)
    child = templates[f"template.queues-{bucket(pusher)}.yaml"]
    function = child["Resources"][QueueIds(pusher).runner]["Properties"]
    urls = function["Environment"]["Variables"]["JOBKIT_QUEUE_URLS"]["Fn::Sub"]
    assert "https://sqs.${AWS::Region}.${AWS::URLSuffix}/${AWS::AccountId}/${Prefix}-jobType001" in urls
    assert "${" + QueueIds(pusher).queue + "}" in urls  # its own queue, in its own stack: a reference
    assert f"${{{QueueIds(target).queue}}}" not in urls


@pytest.fixture
def deployed(written: Path) -> Iterator[LocalStack]:
    chainjobs.TEXTS.clear()
    declaration: Declaration = load_declaration(written / "jobs.toml")
    with LocalStack(declaration, clock=VirtualClock(START), template=written / "template.yaml") as stack:
        yield stack
    chainjobs.TEXTS.clear()


def test_the_local_stack_deploys_the_nested_stacks_and_runs_jobs_across_them(deployed: LocalStack) -> None:
    cloudformation: Any = deployed.client("cloudformation")
    names = {s["StackName"] for s in cloudformation.list_stacks()["StackSummaries"]}
    assert len(names) == 1 + BUCKETS
    assert len(deployed.queue_urls) == 2 * TYPES
    deployed.queue_group("enwiki").push(JobSpecification("jobType005", {"text": "hello"}))
    deployed.drain()
    assert chainjobs.TEXTS == ["hello"]
    assert [r.outcome for r in deployed.results.results] == [Outcome.SUCCEEDED]
    assert all(m.recursion.recursive_loop == "Allow" for m in deployed.mappings.values())


def test_template_warns_when_it_moves_inline_queues_into_nested_stacks(tmp_path: Path) -> None:
    config, output = tmp_path / "jobs.toml", tmp_path / "template.yaml"

    def declare(count: int) -> str:
        return "".join(f'[types.t{n:02d}]\nclass = "m:C"\n\n' for n in range(count))

    config.write_text(declare(10))
    args = ["template", "--config", str(config), "--output", str(output)]
    assert "nested stacks" not in CliRunner().invoke(main, args).output
    config.write_text(declare(40))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0
    assert "replaces every queue" in result.output and (tmp_path / "template.queues-1.yaml").exists()
    assert "replaces every queue" not in CliRunner().invoke(main, args).output  # nested already: nothing moves
