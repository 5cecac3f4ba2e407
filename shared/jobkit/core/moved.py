"""The old import paths of modules that moved into packages, kept for one
release: ``import jobkit.errors`` still works, warns (``DeprecationWarning``)
and gives a module with the same names as ``jobkit.core.errors`` (the same
objects: ``except jobkit.errors.NonRetryableError`` catches what the runner
raises). What an app needs is in ``from jobkit import ...``.

A finder at the end of ``sys.meta_path``: it is asked only for a name that no
other finder found, so it costs nothing on any other import.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: Old path -> new path.
MOVED = {
    **{
        f"jobkit.{name}": f"jobkit.core.{name}"
        for name in (
            "clock",
            "correlation",
            "cron",
            "errors",
            "extras",
            "metrics",
            "outcome",
            "parallel",
            "params_types",
            "resources",
            "spec",
            "wire",
        )
    },
    **{f"jobkit.{name}": f"jobkit.declaration.{name}" for name in ("config", "params_schema", "schedules")},
    **{f"jobkit.{name}": f"jobkit.jobs.{name}" for name in ("canary", "children", "job", "lazy_push")},
    **{f"jobkit.{name}": f"jobkit.runner.{name}" for name in ("backoff", "error_text", "log_level", "registry")},
}


class MovedModules:
    """Finds and loads a moved module's old path."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        return ModuleSpec(name, cast("Loader", self)) if name in MOVED else None

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # the default: a new, empty module of the old name

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED[module.__name__]
        warnings.warn(
            f"{module.__name__} moved to {new}: import from there, or the public names from jobkit",
            DeprecationWarning,
            stacklevel=2,
        )
        real = importlib.import_module(new)
        module.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
        module.__doc__ = real.__doc__


def names_from(package: str, modules: tuple[str, ...]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` for the names its old module held, now in
    ``modules``: looked up on first use (importing the package stays free),
    with a ``DeprecationWarning`` naming the module to import from."""

    def __getattr__(name: str) -> Any:
        if not name.startswith("_"):
            for module in modules:
                found = importlib.import_module(module)
                if name in vars(found):
                    warnings.warn(f"{package}.{name} moved: import it from {module}", DeprecationWarning, stacklevel=2)
                    return vars(found)[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
