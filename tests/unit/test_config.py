"""The declaration: loading, defaults, derived queue settings, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobkit.core.errors import ConfigError, UnknownJobType
from jobkit.declaration.config import Declaration, declaration_to_dict, load_declaration, parse_declaration
from jobkit.declaration.type_options import Backoff


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jobs.toml"
    path.write_text(text)
    return path


def test_example_declaration_has_the_three_mediawiki_types_and_a_scheduled_digest(
    example_declaration: Declaration,
) -> None:
    assert set(example_declaration.types) == {
        "htmlCacheUpdate",
        "refreshLinks",
        "enotifNotify",
        "emailDigest",
        "editReached",  # an edit's batch's on_complete, on the email queue
    }
    reached = example_declaration.types["editReached"]
    assert reached.batch_callback and reached.deliver_once and reached.queue == "enotifNotify"
    assert "editReached" in example_declaration.types["htmlCacheUpdate"].pushes  # it ends an edit's batch
    digest = example_declaration.schedules["nightlyDigest"]
    assert (digest.type, digest.expression, digest.timezone) == ("emailDigest", "cron(0 3 * * ? *)", "Europe/Berlin")
    assert example_declaration.types["emailDigest"].queue == "enotifNotify"  # the email queue's function
    enotif = example_declaration.types["enotifNotify"]
    assert enotif.queue == "enotifNotify" and enotif.max_concurrency == 20 and enotif.deliver_once
    refresh = example_declaration.types["refreshLinks"]
    assert refresh.remove_duplicates and refresh.remove_duplicates_ignore_params == ("causeAction", "causeAgent")


def test_defaults(tmp_path: Path) -> None:
    declaration = load_declaration(write(tmp_path, '[types.refreshLinks]\nclass = "m:C"\n'))
    job_type = declaration.types["refreshLinks"]
    assert (job_type.queue, job_type.max_attempts, job_type.max_concurrency) == ("refreshLinks", 3, 8)
    assert job_type.backoff == Backoff(base_s=10, factor=2, cap_s=900, jitter=0.5)
    assert not job_type.remove_duplicates and not job_type.deliver_once
    assert declaration.queue_name("refreshLinks") == "jobkit-refreshLinks"
    assert declaration.dlq_name("refreshLinks") == "jobkit-refreshLinks-dlq"
    assert declaration.queues["refreshLinks"].visibility_timeout_s == 6 * 60


def test_defaults_table_applies_to_every_type(tmp_path: Path) -> None:
    declaration = load_declaration(
        write(
            tmp_path,
            '[defaults]\nmax_attempts = 7\n[types.a]\nclass = "m:A"\n[types.b]\nclass = "m:B"\nmax_attempts = 2\n',
        )
    )
    assert declaration.types["a"].max_attempts == 7
    assert declaration.types["b"].max_attempts == 2


def test_types_sharing_a_queue_share_one_function(test_declaration: Declaration) -> None:
    queue = test_declaration.queues["lowTraffic"]
    assert queue.types == ("rare", "rarer", "slow")
    assert queue.max_receive_count == 5  # the largest; the runner enforces rare's 2 itself
    assert queue.timeout_s == 120
    assert queue.visibility_timeout_s == 720


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ('[types.a]\nclass = "m:A"\nmax_atempts = 3\n', "types.a.max_atempts", "unknown key"),
        ('[types.a]\nclass = "m:A"\nmax_attempts = 0\n', "types.a.max_attempts", "from 1 to 1000"),
        ('[types.a]\nclass = "m:A"\nmax_attempts = "3"\n', "types.a.max_attempts", "got '3'"),
        ('[types.a]\nclass = "not a path"\n', "types.a.class", "module.path:ClassName"),
        ("[types.a]\nqueue = 'x'\n", "types.a.class", "is required"),
        ('[types.a]\nclass = "m:A"\nbatch_size = 50\n', "types.a.batch_window_s", "at least 1"),
        ('[types.a]\nclass = "m:A"\nbackoff = { base = 1 }\n', "types.a.backoff.base", "unknown key"),
        ('[types.a]\nclass = "m:A"\nbackoff = { jitter = 2 }\n', "types.a.backoff.jitter", "fraction"),
        ('[types.a]\nclass = "m:A"\npushes = ["b"]\n', "types.a.pushes", "undeclared type 'b'"),
        ('[types."a.b"]\nclass = "m:A"\n', "types.a.b", "type name"),
        ('[jobkit]\nprefix = "has space"\n[types.a]\nclass = "m:A"\n', "jobkit.prefix", "must match"),
        ("[jobkit]\nprefix = 'x'\n", "types", "at least one"),
        ('[typos.a]\nclass = "m:A"\n', "typos", "unknown key"),
        ('[types.a]\nclass = "m:A"\nmax_concurrency = 1\n', "types.a.max_concurrency", "from 2 to 1000"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path: Path, text: str, key: str, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_declaration(path)
    assert raised.value.key == key
    assert problem in raised.value.problem
    assert str(raised.value).startswith(f"{path}: {key}: ")


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_declaration(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_declaration(write(tmp_path, "[types\n"))


def test_unknown_type_lookup(example_declaration: Declaration) -> None:
    with pytest.raises(UnknownJobType, match="nope"):
        example_declaration.job_type("nope")


def test_a_runners_declaration_says_an_unknown_type_may_be_missing_from_pushes(
    example_declaration: Declaration,
) -> None:
    # A runner's declaration (its environment's) holds its queue's types and what they push:
    # a job that pushes another declared type through the app's group learns what to add
    runner = parse_declaration(
        declaration_to_dict(example_declaration, only_types={"refreshLinks"}), source="$JOBKIT_DECLARATION"
    )
    with pytest.raises(UnknownJobType, match='add "enotifNotify" to pushes of the type whose jobs push it'):
        runner.job_type("enotifNotify")


def test_round_trip_through_a_dict(example_declaration: Declaration) -> None:
    again = parse_declaration(declaration_to_dict(example_declaration), source="<dict>")
    assert again.types == example_declaration.types
    assert again.queues == example_declaration.queues


def test_subset_keeps_only_named_types(example_declaration: Declaration) -> None:
    subset = parse_declaration(declaration_to_dict(example_declaration, only_types={"refreshLinks"}), source="<d>")
    assert set(subset.types) == {"refreshLinks"}


def test_with_prefix_renames_resources(example_declaration: Declaration) -> None:
    staged = example_declaration.with_prefix("prod")
    assert staged.queue_name("refreshLinks") == "prod-refreshLinks"
    assert staged.table_name == "prod-jobs"
    with pytest.raises(ConfigError):
        example_declaration.with_prefix("bad prefix")


@pytest.mark.parametrize(
    ("queue", "what"),
    [("q" * 41, "its runner function's name would be 65 characters"), ("q" * 60, "over Lambda's 64")],
)
def test_a_queue_name_aws_would_refuse_is_refused_when_the_declaration_loads(queue: str, what: str) -> None:
    # Under the longest prefix (16), {prefix}-runner-{queue} must fit Lambda's 64 and
    # {prefix}-{queue}-dlq SQS's 80: a queue name of 41 or more does not
    with pytest.raises(ConfigError, match="at most 40 characters") as refused:
        parse_declaration({"types": {"t": {"class": "m:C", "queue": queue}}}, source="x")
    assert what in str(refused.value) and "types.t.queue" in str(refused.value)
    parse_declaration({"types": {"t": {"class": "m:C", "queue": "q" * 40}}}, source="x")
