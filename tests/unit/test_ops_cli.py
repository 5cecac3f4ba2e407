"""The CLI's configuration: where it looks, and with which endpoint, without
making a request; and endpoints that are not URLs, stopped before one."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from jobkit.cli import main
from jobkit.cli.ops import register_ops_commands
from jobkit.cli.options import OpsCommand, OpsGroup, check_endpoints, endpoint_problem
from jobkit.ops.config import CliConfig

from conftest import FIXTURES


def test_clients_are_built_on_first_use_with_the_endpoint_given() -> None:
    config = CliConfig(endpoint_url="http://127.0.0.1:4566", region="eu-west-1")
    assert config._clients is None  # nothing built up front
    sqs = config.sqs
    assert sqs.meta.endpoint_url == "http://127.0.0.1:4566" and sqs.meta.region_name == "eu-west-1"
    assert config.sqs is sqs


def test_boto3_reads_the_endpoint_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://localhost:5000")
    assert CliConfig().cloudwatch.meta.endpoint_url == "http://localhost:5000"


def test_the_prefix_names_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    config = CliConfig(config_path=FIXTURES / "jobs.toml", prefix="prod")
    assert config.declaration.queue_name("noop") == "prod-noop" and config.declaration.table_name == "prod-jobs"
    monkeypatch.setenv("JOBKIT_CONFIG", str(FIXTURES / "jobs.toml"))
    monkeypatch.setenv("JOBKIT_PREFIX", "stage")
    assert CliConfig().declaration.dlq_name("noop") == "stage-noop-dlq"


@pytest.mark.parametrize(
    "url", ["localhost:4566", "foo", "http//x", "127.0.0.1:4566", "ftp://127.0.0.1:4566", "http://", "http://x:port"]
)
def test_an_endpoint_that_is_not_a_url_is_a_one_line_error(url: str) -> None:
    # No request is made: it fails before any client is built
    result = CliRunner().invoke(main, ["queues", "--config", str(FIXTURES / "jobs.toml"), "--endpoint-url", url])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: --endpoint-url {url!r} is not an endpoint URL") and "http://127.0.0.1:4566" in line
    # with --json, the same message as JSON
    as_json = CliRunner().invoke(main, ["dlq", "list", "noop", "--endpoint-url", url, "--json"])
    assert as_json.exit_code == 2 and as_json.stdout == ""
    assert json.loads(as_json.stderr) == {"error": line.removeprefix("Error: "), "exit_status": 2}


@pytest.mark.parametrize("variable", ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS"])
def test_an_endpoint_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "localhost:4566")
    result = CliRunner().invoke(main, ["top", "--once", "--config", str(FIXTURES / "jobs.toml")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.splitlines() == [
        f"Error: ${variable} 'localhost:4566' is not an endpoint URL (it must start with http:// or https://);"
        " e.g. http://127.0.0.1:4566"
    ]
    # --endpoint-url wins over the environment, as it does in botocore
    check_endpoints("http://127.0.0.1:4566")
    with pytest.raises(click.ClickException, match=r"\$AWS_ENDPOINT_URL"):
        check_endpoints(None, {"AWS_ENDPOINT_URL": "foo"})
    check_endpoints(None, {"AWS_ENDPOINT_URL": "foo", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"})


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:4566", "https://sqs.eu-west-1.amazonaws.com", "http://localhost:5000/", "http://[::1]:4566"],
)
def test_endpoints_that_are_urls_pass(url: str) -> None:
    assert endpoint_problem(url) is None
    assert CliConfig(endpoint_url=url, region="eu-west-1").sqs.meta.endpoint_url  # botocore takes it


def test_every_ops_command_reports_errors_as_json_when_asked() -> None:
    group = click.Group("jobkit")
    register_ops_commands(group)
    commands = [*group.commands.values()]
    for command in list(commands):
        if isinstance(command, click.Group):
            assert isinstance(command, OpsGroup)
            commands += command.commands.values()
    assert [c.name for c in commands if not isinstance(c, (OpsCommand, OpsGroup))] == []
    assert len(commands) == 15  # queues, top, dlq and its five, push, job, cancel, batch, schedules, ui, verify


def test_no_region_says_where_it_looked_and_how_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    result = CliRunner().invoke(main, ["queues", "--config", str(FIXTURES / "jobs.toml")])
    assert result.exit_code == 1
    assert "AWS_REGION is unset, AWS_DEFAULT_REGION is unset" in result.output
    assert "/nonexistent does not exist" in result.output and "or pass --region" in result.output
    assert "Traceback" not in result.output
