"""What the ops commands read and how they fail, on the local stack: ``push
--params`` from a file or stdin, errors as one plain line or, with ``--json``,
as one JSON object on stderr, and ``top --json`` indented like the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from ops_cli import Cli, cli_for

from jobkit.local import LocalStack


@pytest.fixture
def jobkit(stack: LocalStack) -> Cli:
    return cli_for(stack, columns=200, advance=False)


def queued_params(stack: LocalStack, queue: str = "test-noop") -> list[Any]:
    messages = stack.sqs.receive_message(QueueUrl=stack.queue_urls[queue], MaxNumberOfMessages=10)["Messages"]
    return [json.loads(m["Body"])["params"] for m in messages]


def test_params_come_from_a_file_or_stdin(stack: LocalStack, jobkit: Cli, tmp_path: Path) -> None:
    # Given params larger than one command-line argument may be (128 KiB on Linux)
    params = {"pages": [f"Talk:Page number {n}" for n in range(12_000)], "title": "Zürich"}
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params, ensure_ascii=False), encoding="utf-8")
    assert path.stat().st_size > 200_000
    # When they are pushed from the file, and from stdin both ways
    from_file = json.loads(jobkit("push", "noop", "--params", f"@{path}", "--json").stdout)
    jobkit("push", "noop", "--params", "-", input=json.dumps(params))
    jobkit("push", "noop", "--params", "@-", input='{"small": true}')
    # Then each job has them as given
    assert from_file["type"] == "noop" and stack.queue_depth("noop") == 3
    assert sorted(queued_params(stack), key=len) == [{"small": True}, params, params]


def test_bad_params_sources_are_one_line_errors(stack: LocalStack, jobkit: Cli, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"title": "Main Page",}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "latin1.json").write_bytes('{"title": "Zürich"}'.encode("latin-1"))
    missing, broken, listed, latin1 = (tmp_path / name for name in ("missing", "broken", "list", "latin1"))
    for args, message in [
        (
            ["--params", f"@{missing}.json"],
            f"Error: --params @{missing}.json: cannot read {missing}.json: No such file",
        ),
        (["--params", f"@{broken}.json"], f"Error: --params @{broken}.json: {broken}.json is not valid JSON: "),
        (["--params", f"@{listed}.json"], "Error: --params must be a JSON object, got list"),
        (["--params", f"@{latin1}.json"], f"Error: --params @{latin1}.json: {latin1}.json is not UTF-8 text"),
        (["--params", f"@{tmp_path}"], f"Error: --params @{tmp_path}: cannot read {tmp_path}: Is a directory"),
        (["--params", "-"], "Error: --params -: stdin is not valid JSON: Expecting value: line 1 column 1"),
    ]:
        result = jobkit("push", "noop", *args, input="", ok=False)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (args, result.output)
        [line] = result.stderr.splitlines()
        assert line.startswith(message), (args, line)
    assert stack.queue_depth("noop") == 0


def json_error(result: Result, exit_status: int) -> str:
    """The message of a ``--json`` error: the only output, one JSON object on stderr's last line."""
    assert result.exit_code == exit_status and isinstance(result.exception, SystemExit), result.output
    assert result.stdout == ""
    error = json.loads(result.stderr.splitlines()[-1])
    assert set(error) == {"error", "exit_status"} and error["exit_status"] == exit_status
    message: str = error["error"]
    return message


def test_with_json_errors_are_json_on_stderr(stack: LocalStack, jobkit: Cli) -> None:
    # jobkit's own errors
    assert "'nope' is neither a job type nor a queue" in json_error(
        jobkit("dlq", "list", "nope", "--json", ok=False), 1
    )
    assert "unknown job type 'nope'" in json_error(jobkit("push", "nope", "--json", ok=False), 1)
    # AWS's: an error response, and botocore's own
    wrong_stage = json_error(jobkit("queues", "--prefix", "prod", "--json", ok=False), 1)
    assert wrong_stage.startswith("AWS GetQueueUrl: ") and "is the prefix right?" in wrong_stage
    bad_region = json_error(jobkit("top", "--once", "--region", "not a region!", "--json", ok=False), 1)
    assert bad_region.startswith("AWS: ") and "'not a region!'" in bad_region
    # nothing found, and a declined confirmation
    assert "no dead letter with job or message ID" in json_error(
        jobkit("dlq", "show", "noop", "x", "--json", ok=False), 1
    )
    assert json_error(jobkit("dlq", "purge", "noop", "--json", input="n\n", ok=False), 1) == "aborted"
    # bad usage: option values, unknown options and commands, missing arguments
    for args, message in [
        (["top", "--once", "--window", "0"], "Invalid value for '--window': 0 is not in the range 1<=x<=180."),
        (["dlq", "list", "noop", "--limit", "many"], "Invalid value for '--limit': 'many' is not a valid integer"),
        (["queues", "--nope"], "No such option '--nope'."),
        (["dlq", "lsit", "noop"], "No such command 'lsit'."),
        (["dlq", "show", "noop"], "Missing argument 'ID'."),
        (["job", "j-1", "--domain", "enwiki", "--no-domain"], "give --domain or --no-domain, not both"),
    ]:
        assert json_error(jobkit(*args, "--json", ok=False), 2).startswith(message), args


def test_without_json_errors_stay_one_plain_line(jobkit: Cli) -> None:
    for args in (["dlq", "list", "nope"], ["queues", "--prefix", "prod"], ["queues", "--region", "not a region!"]):
        result = jobkit(*args, ok=False)
        assert result.exit_code == 1 and result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith("Error: ") and not line.startswith("Error: {"), line
    usage = jobkit("top", "--window", "0", ok=False)
    assert usage.exit_code == 2 and usage.stderr.splitlines()[-1].startswith("Error: Invalid value for '--window'")


def test_top_json_is_indented_like_every_command(jobkit: Cli) -> None:
    for args in (["top", "--once"], ["queues"]):
        out = jobkit(*args, "--json").stdout
        assert out == json.dumps(json.loads(out), indent=2, ensure_ascii=False) + "\n", args
    assert jobkit("top", "--once", "--json").stdout.startswith('{\n  "at": ')
