"""Job classes, resolved only from the declaration.

A message names a job *type*; the class comes from ``infra/jobs.toml``. No
module or class path in a message is ever imported.
"""

from __future__ import annotations

import importlib
import threading

from jobkit.config import Declaration
from jobkit.errors import JobClassError
from jobkit.job import Job


class JobRegistry:
    """Maps declared job types to their classes, importing each module once."""

    def __init__(self, declaration: Declaration) -> None:
        self._declaration = declaration
        self._classes: dict[str, type[Job]] = {}
        self._lock = threading.Lock()

    def resolve(self, job_type: str) -> type[Job]:
        """The class of a declared type.

        Raises:
            UnknownJobType: the type is not declared.
            JobClassError: the declared class path does not import, or is not a Job.
        """
        cls = self._classes.get(job_type)
        if cls is None:
            cls = self._load(self._declaration.job_type(job_type).class_path)
            with self._lock:
                self._classes[job_type] = cls
        return cls

    @staticmethod
    def _load(class_path: str) -> type[Job]:
        module_name, _, class_name = class_path.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # ImportError, or the module's own import-time error
            raise JobClassError(f"job class {class_path!r} does not import: {type(exc).__name__}: {exc}") from exc
        cls = getattr(module, class_name, None)
        if not (isinstance(cls, type) and issubclass(cls, Job)):
            raise JobClassError(f"job class {class_path!r} is not a subclass of jobkit.Job")
        return cls


def check_classes(declaration: Declaration) -> None:
    """Import every declared class, from ``code_dir`` as the runner would, and
    check that it is a :class:`~jobkit.Job` (``jobkit template --check``).

    Raises:
        ConfigError: naming the declaration file, the type's ``class`` key and
            the import error of the first class that does not resolve.
    """
    import sys

    from jobkit.errors import ConfigError

    code_dir = str(declaration.code_dir.resolve()) if declaration.code_dir is not None else None
    added = code_dir is not None and code_dir not in sys.path
    if added:
        sys.path.insert(0, code_dir)  # type: ignore[arg-type]
    try:
        for job_type in declaration.types.values():
            try:
                JobRegistry._load(job_type.class_path)
            except JobClassError as exc:
                where = f" (code_dir {code_dir})" if code_dir else ""
                raise ConfigError(declaration.source, f"types.{job_type.name}.class", f"{exc}{where}") from exc
    finally:
        if added:
            sys.path.remove(code_dir)  # type: ignore[arg-type]
