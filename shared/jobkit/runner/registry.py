"""Job classes, resolved only from the declaration.

A message names a job *type*; the class comes from ``infra/jobs.toml``. No
module or class path in a message is ever imported.
"""

from __future__ import annotations

import importlib
import threading

from jobkit.core.errors import JobClassError
from jobkit.declaration.config import Declaration
from jobkit.jobs.batch_check import BATCH_CHECK_CLASS, BATCH_CHECK_TYPE
from jobkit.jobs.canary import CANARY_CLASS, CANARY_TYPE
from jobkit.jobs.job import Job


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
            own = {CANARY_TYPE: CANARY_CLASS, BATCH_CHECK_TYPE: BATCH_CHECK_CLASS}  # the types every runner knows
            declared = own.get(job_type) or self._declaration.job_type(job_type).class_path
            cls = self._load(declared)
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
        if cls is None:
            raise JobClassError(f"job class {class_path!r}: module {module_name!r} has no attribute {class_name!r}")
        if not (isinstance(cls, type) and issubclass(cls, Job)):
            raise JobClassError(f"job class {class_path!r} is not a subclass of jobkit.Job")
        return cls
