"""``jobkit init``: a jobs project inside an existing app's repo.

It writes the declaration (``infra/jobs.toml``, one example type), a jobs
package with one :class:`~jobkit.Job` subclass, a test that runs it on the
local stack, the pytest setting that points the ``jobkit_stack`` fixture at
the declaration, the generated SAM template with its Makefile, and a short
``JOBS.md``. It refuses to overwrite any file: it writes all of them or none.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from jobkit.core.errors import JobKitError
from jobkit.core.resources import PREFIX_PATTERN
from jobkit.declaration.config import TYPE_OPTIONS
from jobkit.declaration.options import reference
from jobkit.sam.makefile import DIRECTORY

DECLARATION = Path("infra/jobs.toml")
MAKEFILE = DECLARATION.parent / DIRECTORY / "Makefile"
TESTS = Path("tests/test_jobs.py")
PACKAGE_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class ScaffoldError(JobKitError):
    """The project cannot be scaffolded as asked; nothing was written."""


@dataclass(frozen=True)
class Scaffold:
    """What ``jobkit init`` writes (relative to the app's root) and what it left alone."""

    files: dict[Path, str]
    #: Why the pytest setting was not written, if it was not (an existing pytest configuration).
    pytest_hint: str | None


def plan(
    root: Path, *, package: str = "jobs", template: Path = Path("template.yaml"), prefix: str | None = None
) -> Scaffold:
    """The files for a jobs project in ``root``, without the template (which needs the declaration on disk).

    Raises:
        ScaffoldError: a bad package name or prefix.
    """
    if not PACKAGE_PATTERN.match(package):
        raise ScaffoldError(f"--package {package!r} is not a Python package name (e.g. jobs, myapp.jobs)")
    top = package.split(".")[0]
    if top in sys.stdlib_module_names or top in {"jobkit", "aws_lambda_powertools", "boto3", "botocore"}:
        raise ScaffoldError(f"--package {package!r} would shadow the module {top!r}: pick another name")
    prefix = prefix or default_prefix(root)
    if not PREFIX_PATTERN.match(prefix):
        raise ScaffoldError(
            f"--prefix {prefix!r} must match {PREFIX_PATTERN.pattern} (letters, digits, dashes; 16 at most)"
        )
    if template.is_absolute() or ".." in template.parts:
        raise ScaffoldError(f"--template {template} must be a path inside the directory")
    package_dir = Path(*package.split("."))
    values = {
        "prefix": prefix,
        "package": package,
        "package_dir": package_dir.as_posix(),
        "declaration": DECLARATION.as_posix(),
        "tests": TESTS.as_posix(),
        "template": template.as_posix(),
        "template_from_declaration": Path(os.path.relpath(template, DECLARATION.parent)).as_posix(),
        "makefile": MAKEFILE.as_posix(),
        "type_keys": reference(TYPE_OPTIONS).rstrip("\n"),  # generated from the keys the features declare
    }
    files = {
        DECLARATION: _text("jobs.toml.txt", values),
        TESTS: _text("test_jobs.py.txt", values),
        Path("JOBS.md"): _text("JOBS.md.txt", values),
    }
    # The package, and any parent package that does not exist yet.
    for depth in range(1, len(package_dir.parts) + 1):
        init = Path(*package_dir.parts[:depth]) / "__init__.py"
        if depth == len(package_dir.parts) or not (root / init).parent.exists():
            files[init] = _text("package_init.py.txt", values)
    files[package_dir / "welcome_email.py"] = _text("welcome_email.py.txt", values)
    hint = existing_pytest_config(root)
    if hint is None:
        files[Path("pytest.ini")] = _text("pytest.ini.txt", values)
    _refuse_existing(root, files)
    if (root / package_dir).exists():
        raise ScaffoldError(f"{package_dir.as_posix()}/ exists already: pick another --package")
    return Scaffold(files, hint)


def _refuse_existing(root: Path, files: dict[Path, str]) -> None:
    existing = sorted(path.as_posix() for path in files if (root / path).exists())
    if existing:
        raise ScaffoldError(
            f"not overwriting {', '.join(existing)}: move them aside, or pick other names (--package, --template)"
        )


def write(root: Path, scaffold: Scaffold, generate: Callable[[], dict[Path, str]]) -> list[Path]:
    """Write the scaffold, then what ``generate`` returns (it reads the written
    declaration: the template and its Makefile); all of it, or none.

    Returns:
        every file written, relative to ``root``.

    Raises:
        ScaffoldError: a file exists already (nothing written), or writing or
            generating failed (what was written is removed again).
    """
    _refuse_existing(root, scaffold.files)
    created: list[Path] = []
    made_dirs: list[Path] = []
    try:
        for path, text in scaffold.files.items():
            _write_new(root / path, text, created, made_dirs)
        for path, text in generate().items():
            if path.exists():
                raise ScaffoldError(f"not overwriting {path}: move it aside, or pass --template")
            _write_new(path, text, created, made_dirs)
    except (JobKitError, OSError) as exc:
        for path in reversed(created):
            path.unlink(missing_ok=True)
        for directory in reversed(made_dirs):
            with contextlib.suppress(OSError):
                directory.rmdir()
        if isinstance(exc, ScaffoldError):
            raise
        raise ScaffoldError(f"nothing was created: {exc}") from exc
    return [path.relative_to(root) if path.is_relative_to(root) else path for path in created]


def _write_new(path: Path, text: str, created: list[Path], made_dirs: list[Path]) -> None:
    missing = [parent for parent in reversed(path.parents) if not parent.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    made_dirs.extend(missing)
    with path.open("x") as handle:  # never over a file that appeared meanwhile
        created.append(path)
        handle.write(text)


def default_prefix(root: Path) -> str:
    """A resource name prefix from the app's directory name: letters, digits and dashes, at most 16."""
    name = re.sub(r"[^A-Za-z0-9-]+", "-", root.resolve().name).strip("-")
    name = re.sub(r"^[^A-Za-z]+", "", name)[:16].rstrip("-")
    return name or "jobs"


def existing_pytest_config(root: Path) -> str | None:
    """Where the app already configures pytest (which jobkit does not edit), or ``None``."""
    line = f"jobkit_config = {DECLARATION.as_posix()}` and `pythonpath = ."
    toml = f'jobkit_config = "{DECLARATION.as_posix()}"` and `pythonpath = ["."]'
    for name in ("pytest.ini", ".pytest.ini"):
        if (root / name).exists():
            return f"{name} exists: add `{line}` under [pytest]"
    for name in ("pytest.toml", ".pytest.toml"):
        if (root / name).exists():
            return f"{name} exists: add `{toml}` under [pytest]"

    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        try:
            data = tomllib.loads(pyproject.read_text())
        except tomllib.TOMLDecodeError:
            data = {}
        if "pytest" in data.get("tool", {}):
            return f"pyproject.toml configures pytest: add `{toml}` under [tool.pytest.ini_options]"
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = configparser.ConfigParser()
        try:
            parser.read(root / name)
        except configparser.Error:
            continue
        if parser.has_section(section):
            return f"{name} configures pytest: add `{line}` under [{section}]"
    return None


def _text(name: str, values: dict[str, str]) -> str:
    return Template(resources.files(__name__).joinpath(name).read_text()).substitute(values)
