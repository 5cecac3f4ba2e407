"""`jobkit ui` as a command: where it refuses to serve, what it imports, and
what it adds to the Lambda layer (nothing but its own files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import jobkit
from jobkit.cli.ops import register_ops_commands
from jobkit.ui.access import bind_problem, host_name, is_loopback
from jobkit.ui.sparkline import sparkline

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
WEB_STACK = ("starlette", "jinja2", "uvicorn", "jobkit.ui")


def jobkit_cli(*args: str, env: dict[str, str] | None = None) -> click.testing.Result:
    group = click.Group("jobkit")
    register_ops_commands(group)
    return CliRunner().invoke(group, ["ui", "--config", str(FIXTURES / "ui.toml"), *args], env=env)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "myhost.example"])
def test_it_refuses_an_address_other_than_loopback_without_a_token(host: str) -> None:
    result = jobkit_cli("--host", host, env={"JOBKIT_UI_TOKEN": ""})
    assert result.exit_code == 2
    assert f"refusing to serve on {host} without --token" in result.output
    # as one JSON error with --json, like every ops command
    result = jobkit_cli("--host", host, "--json", env={"JOBKIT_UI_TOKEN": ""})
    assert result.exit_code == 2
    assert json.loads(result.stderr)["error"].startswith(f"refusing to serve on {host}")


def test_a_token_must_not_be_guessable() -> None:
    result = jobkit_cli("--host", "0.0.0.0", "--token", "short")
    assert result.exit_code == 2 and "at least 16 characters" in result.output
    result = jobkit_cli("--host", "0.0.0.0", env={"JOBKIT_UI_TOKEN": "short"})
    assert result.exit_code == 2 and "at least 16 characters" in result.output


def test_loopback_is_served_without_a_token_and_anything_else_only_with_one() -> None:
    for host in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host) and bind_problem(host, None) is None
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.org", "localhost.example.org"):
        assert not is_loopback(host)
        assert bind_problem(host, None) is not None
        assert bind_problem(host, "a-long-enough-token") is None
    assert [host_name(h) for h in ("127.0.0.1:80", "[::1]:8080", "localhost", "::1")] == [
        "127.0.0.1",
        "::1",
        "localhost",
        "::1",
    ]


def test_a_bad_endpoint_is_one_line_before_anything_is_served() -> None:
    result = jobkit_cli("--endpoint-url", "127.0.0.1:4566")
    assert result.exit_code == 2 and "is not an endpoint URL" in result.output


def test_no_other_command_and_not_the_runner_imports_the_web_stack() -> None:
    code = (
        "import sys, jobkit.cli.commands, jobkit.handler, jobkit.runner\n"
        "print([m for m in sys.modules if m.split('.')[0] in ('starlette', 'jinja2', 'uvicorn') or m == 'jobkit.ui'])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_layer_does_not_carry_the_web_stack() -> None:
    from jobkit.sam.layer import runtime_requirements

    pins = [pin.split("==")[0] for pin in runtime_requirements()]
    assert not {"starlette", "jinja2", "uvicorn", "markupsafe", "h11"} & set(pins)
    # it copies the jobkit package, whose UI files are a few tens of kilobytes
    ui = Path(jobkit.__file__).parent / "ui"
    size = sum(path.stat().st_size for path in ui.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    assert size < 100_000


def test_a_sparkline_is_svg_with_a_line_per_series_and_gaps() -> None:
    svg = str(sparkline({"in": [1.0, None, 3.0, 4.0], "out": [None, None, None, None]}, label="a <label>"))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert 'aria-label="a &lt;label&gt;"' in svg
    [path] = [part for part in svg.split("<path")[1:]]
    assert 'class="in"' in path and path.count("M") == 2  # two runs: the gap breaks the line
    assert 'class="out"' not in svg  # no datapoint: no line
    assert "<path" not in str(sparkline({"in": []}, label="empty"))
