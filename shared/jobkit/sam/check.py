"""``jobkit template --check``: every declared class imports as it will in the runner function,
and pushes no type its runner would not know (:mod:`jobkit.sam.pushes`).

The job code is copied as ``sam build`` copies it (only the classes' top-level
packages) into a scratch directory, and a separate, isolated interpreter (``-I``:
no current directory, no ``PYTHONPATH``) imports each class from there. A class
that imports a module of the app that is not shipped (a ``settings.py`` beside
the package, say) fails here, not in Lambda. Third-party packages are imported
from this virtualenv, so the check cannot tell that one is missing from the
``requirements`` file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from jobkit.core.errors import ConfigError
from jobkit.declaration.config import Declaration
from jobkit.sam.pushes import check_pushes
from jobkit.sam.runner import copy_code

_IMPORT_EACH = """
import json, sys
sys.path.insert(0, sys.argv[1])
from jobkit.core.errors import JobClassError
from jobkit.runner.registry import JobRegistry
from jobkit.sam.pushes import literal_pushes
problems, pushes = {}, {}
for name, class_path in json.loads(sys.argv[2]).items():
    try:
        pushes[name] = literal_pushes(JobRegistry._load(class_path), sys.argv[1])
    except JobClassError as exc:
        problems[name] = str(exc)
    except BaseException as exc:  # a module that calls sys.exit() or raises KeyboardInterrupt at import
        problems[name] = f"job class {class_path!r} does not import: {type(exc).__name__}: {exc}"
print(json.dumps({"problems": problems, "pushes": pushes}))
"""


def check_classes(declaration: Declaration) -> None:
    """Raise :class:`ConfigError` (file, ``types.NAME.class``, the import error) for the
    first declared class that does not import from the shipped code or is not a Job;
    then (``types.NAME.pushes``) for one whose code obviously pushes a type its
    runner would not know (:mod:`jobkit.sam.pushes`)."""
    if declaration.requirements is not None and not declaration.requirements.is_file():
        raise ConfigError(declaration.source, "jobkit.requirements", f"{declaration.requirements} does not exist")
    classes = {name: job_type.class_path for name, job_type in declaration.types.items()}
    with tempfile.TemporaryDirectory(prefix="jobkit-check-") as stage:
        copy_code(declaration, Path(stage))
        result = subprocess.run(
            [sys.executable, "-I", "-c", _IMPORT_EACH, stage, json.dumps(classes)],
            capture_output=True,
            text=True,
            cwd=stage,
        )
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
        problems: dict[str, str] = found["problems"]
        pushes: dict[str, list[list[str]]] = found["pushes"]
    except (ValueError, IndexError, KeyError, TypeError):
        raise ConfigError(
            declaration.source, "types", f"importing the job classes failed: {result.stderr.strip()[-500:]}"
        ) from None
    for name, problem in problems.items():
        raise ConfigError(
            declaration.source,
            f"types.{name}.class",
            f"{problem} (importing from the code a runner ships: the classes' top-level packages in "
            f"{declaration.code_dir or Path(declaration.source).parent})",
        )
    check_pushes(declaration, pushes)
