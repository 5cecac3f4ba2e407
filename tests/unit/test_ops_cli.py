"""The CLI's configuration: where it looks, and with which endpoint, without
making a request."""

from __future__ import annotations

import pytest

from jobkit.cli.config import CliConfig

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
