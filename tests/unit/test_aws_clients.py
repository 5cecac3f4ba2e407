"""Which Region jobkit's clients use: the one its docs tell users to export.

botocore alone reads ``AWS_DEFAULT_REGION`` and the profile, not
``AWS_REGION``, which Lambda sets, the other AWS SDKs and the AWS CLI read
first, and jobkit's docs export; a push or an ops command with only
``AWS_REGION`` set failed with "You must specify a region".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import NoRegion
from jobkit.wiring import AwsClients


@pytest.fixture(autouse=True)
def no_region(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")


def region_of(clients: AwsClients) -> str | None:
    region: str | None = clients.client("sqs").meta.region_name
    return region


def test_aws_region_alone_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert region_of(AwsClients()) == "eu-west-1"


def test_aws_region_comes_before_aws_default_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert region_of(AwsClients()) == "eu-west-1"


def test_aws_default_region_still_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert region_of(AwsClients()) == "us-west-2"


def test_an_explicit_region_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert region_of(AwsClients(region="ap-south-1")) == "ap-south-1"


def test_a_profiles_region_counts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("[profile ops]\nregion = eu-central-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "ops")
    assert region_of(AwsClients()) == "eu-central-1"


def test_no_region_anywhere_says_where_it_looked(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(NoRegion) as caught:
        AwsClients().client("sqs")
    message = str(caught.value)
    assert "AWS_REGION is unset, AWS_DEFAULT_REGION is unset, and the AWS profile 'default'" in message
    assert "export AWS_REGION=" in message


def test_an_empty_default_region_is_named_as_what_hides_the_profiles(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile dev]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "dev")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "")
    monkeypatch.setenv("AWS_REGION", " ")
    with pytest.raises(NoRegion, match=r"AWS_REGION is empty, and AWS_DEFAULT_REGION is empty \(which hides"):
        AwsClients().client("sqs")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert region_of(AwsClients()) == "us-west-2"
