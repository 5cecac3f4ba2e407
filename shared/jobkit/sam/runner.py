"""A runner function's code: the app's job package(s), and the requirements the declaration names.

The code is what the declared job classes import from: for each class path
``jobs.welcome:WelcomeEmailJob``, its top-level package (``jobs``) or module,
found in ``code_dir``. Only those are copied, so a ``code_dir`` that is the
app's root does not ship the app's tests or virtualenv; inside them, dotfiles
(``.env``), bytecode and symbolic links stay out too.
Third-party packages the jobs import are listed in the file that ``[jobkit]
requirements`` names, and cross-installed for the Lambda runtime; jobkit
itself comes from the layer. A declaration with a ``tracing = true`` type adds
the X-Ray SDK (``jobkit-aws[tracing]``), at the version installed here, unless
the requirements name it: the layer stays without it, and a runner imports it
only when a traced job runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

from jobkit.core.errors import ConfigError
from jobkit.core.extras import DISTRIBUTION
from jobkit.declaration.config import Declaration
from jobkit.sam.layer import IGNORED, BuildError, pip_install


def code_root(declaration: Declaration) -> Path:
    """Where the declared classes are imported from: ``code_dir``, else the declaration's directory."""
    return declaration.code_dir if declaration.code_dir is not None else Path(declaration.source).parent


def top_level_names(declaration: Declaration) -> dict[str, list[str]]:
    """Each top-level package or module the declared classes live in, and the types in it."""
    names: dict[str, list[str]] = {}
    for job_type in declaration.types.values():
        top = job_type.class_path.partition(":")[0].split(".")[0]
        names.setdefault(top, []).append(job_type.name)
    return dict(sorted(names.items()))


def code_package(declaration: Declaration) -> Path | None:
    """The one package directory all declared classes live in, or ``None`` (several
    top-level packages, or a module): what ``sam build`` watches for a runner (its
    ``CodeUri``), which SAM copies for every runner before the Makefile runs."""
    root = code_root(declaration)
    tops = list(top_level_names(declaration))
    if len(tops) == 1 and (root / tops[0]).is_dir():
        return root / tops[0]
    return None


#: What a ``tracing = true`` type needs in its runner (Powertools Tracer's X-Ray SDK).
TRACING_DISTRIBUTION = "aws-xray-sdk"


def build_runner(declaration: Declaration, artifacts_dir: Path) -> list[str]:
    """Copy the job code into ``artifacts_dir`` and install the declared requirements
    (and the X-Ray SDK if a type is traced); returns what was copied (top-level names)."""
    copied = copy_code(declaration, artifacts_dir)
    if declaration.requirements is not None or _traced(declaration):
        _install_requirements(declaration, artifacts_dir)
    return copied


def _traced(declaration: Declaration) -> list[str]:
    return [name for name, job_type in declaration.types.items() if job_type.tracing]


def tracing_pin(declaration: Declaration) -> str:
    """``aws-xray-sdk==VERSION``, the version installed here (the one tests ran with).

    Raises:
        BuildError: a type is traced, and it is not installed.
    """
    try:
        version = importlib.metadata.version(TRACING_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(
            f"types.{_traced(declaration)[0]} has tracing = true, so its runner needs {TRACING_DISTRIBUTION}, "
            f"which is not installed here: pip install '{DISTRIBUTION}[tracing]' (or add it to the requirements)"
        ) from None
    return f"{TRACING_DISTRIBUTION}=={version}"


def copy_code(declaration: Declaration, artifacts_dir: Path) -> list[str]:
    """Copy the top-level packages and modules of the declared classes into ``artifacts_dir``."""
    root = code_root(declaration)
    artifacts_dir.mkdir(parents=True, exist_ok=True)
    copied = []
    for top, types in top_level_names(declaration).items():
        package, module = root / top, root / f"{top}.py"
        if package.is_dir():
            if (artifacts_dir / top).exists():
                shutil.rmtree(artifacts_dir / top)
            shutil.copytree(package, artifacts_dir / top, ignore=_left_out)
        elif module.is_file():
            shutil.copy2(module, artifacts_dir / module.name)
        else:
            raise ConfigError(
                declaration.source,
                f"types.{types[0]}.class",
                f"{top!r} is neither a package ({package}{os.sep}) nor a module ({module}) in code_dir",
            )
        copied.append(top)
    return copied


def _left_out(directory: str, names: list[str]) -> set[str]:
    """What is not shipped: dotfiles and dot-directories (``.env``, ``.git``), bytecode,
    and symbolic links, which could point anywhere on the build machine."""
    left = set(IGNORED(directory, names))
    for name in names:
        path = Path(directory) / name
        if name.startswith("."):
            left.add(name)
        elif path.is_symlink():
            print(f"jobkit runner: not shipping the symbolic link {path}", file=sys.stderr)
            left.add(name)
    return left


def _install_requirements(declaration: Declaration, artifacts_dir: Path) -> None:
    """Resolve the requirements for the Lambda runtime, then install what neither the
    runtime nor the layer provides. A package the layer carries must resolve to the
    layer's version: a second copy in the function would shadow the layer's."""
    from packaging.utils import canonicalize_name

    from jobkit.sam.layer import RUNTIME_PROVIDED, runtime_requirements

    path = declaration.requirements
    named: list[str] = []
    if path is not None:
        if not path.is_file():
            raise ConfigError(declaration.source, "jobkit.requirements", f"{path} does not exist")
        if any(line.split("#")[0].strip() for line in path.read_text().splitlines()):
            named = ["-r", str(path)]
    resolved = _resolve(named) if named else []
    if _traced(declaration) and canonicalize_name(TRACING_DISTRIBUTION) not in {
        canonicalize_name(name) for name, _ in resolved
    }:
        resolved = _resolve([*named, tracing_pin(declaration)])
    if not resolved:
        return
    where = path if path is not None else Path(declaration.source)
    layer = dict(pin.split("==", 1) for pin in runtime_requirements())
    install = []
    for name, version in resolved:
        key = canonicalize_name(name)
        if key in RUNTIME_PROVIDED:
            continue  # the Lambda runtime's copy is used
        if key in {DISTRIBUTION, "jobkit"}:
            raise BuildError(f"{where}: {name} is in the jobkit layer; remove it from the requirements")
        if key in layer:
            if layer[key] != version:
                raise BuildError(
                    f"{where}: resolves {name} {version}, but the jobkit layer carries {layer[key]}, which the "
                    f"function would then shadow: allow {name}=={layer[key]}"
                )
            continue
        install.append(f"{name}=={version}")
    if install:
        pip_install(artifacts_dir, ["--no-deps", *install])


def _resolve(requirements: list[str]) -> list[tuple[str, str]]:
    """(name, version) of everything pip would install for ``requirements`` (pip's
    arguments: ``-r FILE``, specifiers), for the runtime."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="jobkit-resolve-") as scratch:
        report = Path(scratch) / "report.json"
        pip_install(
            Path(scratch) / "target",
            ["--dry-run", "--ignore-installed", "--report", str(report), *requirements],
        )
        installs = json.loads(report.read_text()).get("install", [])
    return [(item["metadata"]["name"], item["metadata"]["version"]) for item in installs]
