"""An app that adopts jobkit as a new user would, from a wheel of this checkout.

Used by the end-to-end test (tests/e2e) and by ``make sam-check``, which runs
``python tests/deploy/app_project.py DIR``: it builds the wheel, installs it
with ``[local]`` into ``DIR/.venv``, runs ``jobkit init`` in ``DIR``, and adds
a second job type, as the README's "Use jobkit in your app" tells a user to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SECOND_TYPE = """
[types.resizeAvatar]
# A second type, added by hand: identical resizes collapse.
class = "jobs.resize_avatar:ResizeAvatarJob"
remove_duplicates = true
"""

SECOND_MODULE = '''"""resizeAvatar: make the small sizes of a user's new avatar."""

from __future__ import annotations

from jobkit import Job


class ResizeAvatarJob(Job):
    def run(self) -> bool:
        sizes = self.params["sizes"]
        return all(isinstance(size, int) and size > 0 for size in sizes)
'''

SECOND_TEST = '''"""resizeAvatar's tests."""

from __future__ import annotations

from jobkit import JobSpecification
from jobkit.testing import JobkitStack, Outcome

from jobs.resize_avatar import ResizeAvatarJob  # the app's own package, imported by a test


def test_a_size_of_zero_is_refused() -> None:
    assert ResizeAvatarJob(JobSpecification("resizeAvatar", {"user_id": 7, "sizes": [0]})).run() is False


def test_identical_resizes_collapse(jobkit_stack: JobkitStack) -> None:
    spec = {"user_id": 7, "sizes": [32, 64]}
    jobkit_stack.push([JobSpecification("resizeAvatar", spec), JobSpecification("resizeAvatar", spec)])
    jobkit_stack.drain()
    assert jobkit_stack.outcomes("resizeAvatar") == {Outcome.SUCCEEDED: 1, Outcome.DUPLICATE: 1}
'''


class Timings:
    """How long each step a user takes took, for the closing figures."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    def run(self, label: str, command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        start = time.perf_counter()
        try:
            return subprocess.run(command, text=True, capture_output=True, **kwargs)  # type: ignore[call-overload,no-any-return]
        finally:
            self.steps.append((label, time.perf_counter() - start))

    def report(self) -> str:
        return "\n".join(f"{seconds:7.1f} s  {label}" for label, seconds in self.steps)


def checked(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        raise AssertionError(f"{result.args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def build_wheel(out: Path, timings: Timings) -> Path:
    """The wheel of this checkout, as a release would publish it."""
    shutil.rmtree(out, ignore_errors=True)
    checked(
        timings.run(
            "build the wheel",
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        )
    )
    [wheel] = out.glob("jobkit_aws-*.whl")
    return wheel


def make_venv(path: Path, requirement: str, timings: Timings, label: str) -> Path:
    """A fresh virtualenv with ``requirement`` installed; returns its bin directory."""
    shutil.rmtree(path, ignore_errors=True)
    venv.create(path, with_pip=True)
    bin_dir = path / "bin"
    checked(
        timings.run(
            label,
            [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement],
        )
    )
    return bin_dir


def app_environment(bin_dir: Path) -> dict[str, str]:
    """The environment of a shell with the app's virtualenv active, and no jobkit checkout on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBKIT_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    return env


def add_second_type(app: Path) -> None:
    """What a user does to add a type: declare it, write its class and a test."""
    with (app / "infra" / "jobs.toml").open("a") as declaration:
        declaration.write(SECOND_TYPE)
    (app / "jobs" / "resize_avatar.py").write_text(SECOND_MODULE)
    (app / "tests" / "test_resize_avatar.py").write_text(SECOND_TEST)


def prepare(app: Path, timings: Timings | None = None) -> Path:
    """A scaffolded app in ``app`` with jobkit from a wheel in ``app/.venv``; returns the venv's bin."""
    timings = timings or Timings()
    shutil.rmtree(app, ignore_errors=True)
    app.mkdir(parents=True)
    wheel = build_wheel(app.parent / f"{app.name}-dist", timings)
    bin_dir = make_venv(app / ".venv", f"{wheel}[local]", timings, "pip install 'jobkit-aws[local]' (fresh venv)")
    checked(timings.run("jobkit init", [str(bin_dir / "jobkit"), "init"], cwd=app, env=app_environment(bin_dir)))
    add_second_type(app)
    checked(
        timings.run("jobkit template", [str(bin_dir / "jobkit"), "template"], cwd=app, env=app_environment(bin_dir))
    )
    return bin_dir


if __name__ == "__main__":
    steps = Timings()
    prepare(Path(sys.argv[1]).resolve(), steps)
    print(steps.report())
