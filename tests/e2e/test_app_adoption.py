"""A new user adopts jobkit in their own app: from a wheel, with nothing of this checkout.

The steps are the README's "Use jobkit in your app": install the wheel with
``[local]`` into a fresh virtualenv, ``jobkit init`` in an empty directory, add
a second job type, run the scaffolded tests, ``jobkit template --check`` (and
see it fail, naming the key, for a broken class path), and ``jobkit local up``
with a push from another process. ``make sam-check`` builds the same project
with ``sam build``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app_project import Timings, app_environment, build_wheel, checked, make_venv, prepare
from process_lines import Lines

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def timings() -> Iterator[Timings]:
    steps = Timings()
    yield steps
    print("\n" + steps.report())


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, timings: Timings) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("adopt") / "myshop"
    bin_dir = prepare(root, timings)
    checked(timings.run("pip install pytest", [str(bin_dir / "python"), "-m", "pip", "install", "-q", "pytest"]))
    return root, bin_dir


def test_init_writes_the_project_and_refuses_to_overwrite(app: tuple[Path, Path]) -> None:
    root, bin_dir = app
    for path in ("infra/jobs.toml", "jobs/__init__.py", "jobs/welcome_email.py", "tests/test_jobs.py", "pytest.ini"):
        assert (root / path).is_file(), path
    assert (root / "template.yaml").read_text().count("Handler: jobkit.handler.handler") == 2  # two types, two runners
    before = (root / "infra" / "jobs.toml").read_text()
    again = subprocess.run([str(bin_dir / "jobkit"), "init"], cwd=root, env=app_environment(bin_dir), **TEXT)
    assert again.returncode == 1
    assert "not overwriting" in again.stderr and "infra/jobs.toml" in again.stderr
    assert (root / "infra" / "jobs.toml").read_text() == before


def test_the_scaffolded_tests_pass_from_any_directory(app: tuple[Path, Path], timings: Timings) -> None:
    root, bin_dir = app
    env = app_environment(bin_dir)
    result = checked(timings.run("pytest (the app's job tests)", [str(bin_dir / "pytest"), "-q"], cwd=root, env=env))
    assert "4 passed" in result.stdout, result.stdout
    # Started elsewhere, pytest still finds the declaration through the ini file.
    elsewhere = checked(
        subprocess.run([str(bin_dir / "pytest"), "-q", str(root / "tests")], cwd=root / "jobs", env=env, **TEXT)
    )
    assert "4 passed" in elsewhere.stdout


def test_the_demo_runs_in_the_app_on_its_own_declaration(app: tuple[Path, Path], timings: Timings) -> None:
    root, bin_dir = app
    command = [str(bin_dir / "jobkit"), "demo", "--backlinks", "2000", "--pages", "20", "--watchers", "5"]
    result = checked(timings.run("jobkit demo (in the app)", command, cwd=root, env=app_environment(bin_dir)))
    assert "balances" in result.stdout and "ran on the demo's own declaration, shipped with jobkit" in result.stdout
    assert "welcomeEmail" not in result.stdout


def test_template_check_imports_every_class(app: tuple[Path, Path], timings: Timings) -> None:
    root, bin_dir = app
    env = app_environment(bin_dir)
    command = [str(bin_dir / "jobkit"), "template", "--check"]
    ok = checked(timings.run("jobkit template --check", command, cwd=root, env=env))
    assert "every declared class imports" in ok.stdout
    declaration = root / "infra" / "jobs.toml"
    good = declaration.read_text()
    declaration.write_text(good.replace("jobs.resize_avatar:ResizeAvatarJob", "jobs.resize_avatr:ResizeAvatarJob"))
    try:
        broken = subprocess.run(command, cwd=root, env=env, **TEXT)
    finally:
        declaration.write_text(good)
    assert broken.returncode == 1
    assert "infra/jobs.toml" in broken.stderr and "types.resizeAvatar.class" in broken.stderr
    assert "No module named 'jobs.resize_avatr'" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_local_up_runs_a_job_pushed_from_another_process(app: tuple[Path, Path], timings: Timings) -> None:
    root, bin_dir = app
    env = app_environment(bin_dir)
    port = _free_port()
    start = time.perf_counter()
    server = subprocess.Popen(
        [str(bin_dir / "jobkit"), "local", "up", "--port", str(port)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines = Lines(server)
    try:
        lines.wait_for("running jobs", timeout=60)
        banner = "".join(lines.seen)
        exports = dict(re.findall(r"(AWS_[A-Z_]+|JOBKIT_CONFIG)=(\S+)", banner))
        assert exports["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{port}"
        timings.steps.append(("jobkit local up (until ready)", time.perf_counter() - start))
        push = (
            "from jobkit import JobSpecification, queue_group\n"
            "print(queue_group().push(JobSpecification('welcomeEmail', {'user_id': 1, 'email': 'a@example.org'}))[0])"
        )
        pushed = checked(subprocess.run([str(bin_dir / "python"), "-c", push], cwd="/", env={**env, **exports}, **TEXT))
        job_id = pushed.stdout.strip()
        lines.wait_for(f"succeeded welcomeEmail {job_id}", timeout=30)
        assert "Traceback" not in "".join(lines.seen)
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_without_extras_the_push_sdk_works_and_the_cli_names_its_extra(
    tmp_path: Path, app: tuple[Path, Path], timings: Timings
) -> None:
    wheel = build_wheel(tmp_path / "dist", timings)
    bin_dir = make_venv(tmp_path / "venv", str(wheel), timings, "pip install jobkit-aws (no extras, fresh venv)")
    env = app_environment(bin_dir)
    cli = subprocess.run([str(bin_dir / "jobkit"), "--help"], env=env, **TEXT)
    assert cli.returncode == 1
    assert cli.stderr.strip().endswith("pip install 'jobkit-aws[cli]'"), cli.stderr
    assert "Traceback" not in cli.stderr and "ModuleNotFoundError" not in cli.stderr
    probe = (
        "import json, sys\n"
        "import jobkit, jobkit.handler\n"
        "from jobkit import JobSpecification, queue_group\n"
        "try:\n"
        "    import jobkit.testing\n"
        "except ImportError as exc:\n"
        "    print(json.dumps({'error': str(exc), 'type': type(exc).__name__, 'boto3': 'boto3' in sys.modules}))\n"
    )
    out = json.loads(checked(subprocess.run([str(bin_dir / "python"), "-c", probe], env=env, **TEXT)).stdout)
    assert out["type"] == "MissingExtra" and "pip install 'jobkit-aws[local]'" in out["error"]
    assert out["boto3"] is False  # the push SDK and the handler need botocore only
    installed = checked(subprocess.run([str(bin_dir / "python"), "-m", "pip", "list", "--format=json"], **TEXT))
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert not names & {"click", "rich", "moto", "boto3", "pyyaml"}, names


TEXT: dict[str, object] = {"capture_output": True, "text": True, "timeout": 300}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
