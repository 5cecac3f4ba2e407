"""``jobkit template --check``: the types a job class obviously pushes, against its type's ``pushes``.

A runner knows only its queue's types and the types they push
(:meth:`jobkit.declaration.config.Declaration.for_runner`), so a job that pushes a type
missing from its type's ``pushes`` fails every attempt that pushes it. The
check reads each class's instance methods (its own, and those of its bases
outside jobkit) for ``JobSpecification("name", ...)`` with a literal type
name: a spec built in a job's own methods is one its runner sends. A factory
(a class or static method, which an app calls) is not read. A type named any
other way (a variable, a param, a helper function elsewhere) it cannot see:
the local stack, whose runners know what Lambda's know, fails such a push the
same way, naming the ``pushes`` to add.
"""

from __future__ import annotations

import ast
import inspect
import os
import textwrap
from collections.abc import Mapping, Sequence

from jobkit.core.errors import ConfigError
from jobkit.declaration.config import Declaration

#: The name of the spec class as a job's code calls it (``JobSpecification`` or ``jobkit.JobSpecification``).
_SPEC_CLASS = "JobSpecification"


def literal_pushes(job_class: type, root: str) -> list[tuple[str, str]]:
    """The literal type names of the specs a job class's instance methods build,
    each with where (``jobs/parent.py:12, in run()``, relative to ``root``)."""
    found: list[tuple[str, str]] = []
    for klass in job_class.__mro__:
        if klass is object or klass.__module__.partition(".")[0] == "jobkit":
            continue
        try:
            lines, first = inspect.getsourcelines(klass)
            filename = inspect.getsourcefile(klass) or "?"
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):  # no source (a C or generated class): nothing to read
            continue
        where = os.path.relpath(filename, root) if filename != "?" else filename
        definition = tree.body[0] if tree.body else None
        if not isinstance(definition, ast.ClassDef):
            continue
        for method in definition.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or _is_factory(method):
                continue
            for node in ast.walk(method):
                target = _literal_type(node)
                if target is not None:
                    line = first + getattr(node, "lineno", 1) - 1
                    found.append((target, f"{where}:{line}, in {method.name}()"))
    return found


def check_pushes(declaration: Declaration, found: Mapping[str, Sequence[Sequence[str]]]) -> None:
    """Raise :class:`ConfigError` (file, ``types.NAME.pushes``) for the first type
    whose class builds a spec of a type its runner would not know."""
    for name, pushes in found.items():
        job_type = declaration.types[name]
        known = declaration.for_runner(job_type.queue).types
        for target, where in pushes:
            if target in known:
                continue
            pushed = f'"{target}" (JobSpecification("{target}", ...) at {where})'
            if target in declaration.types:
                problem = (
                    f"lacks {pushed}, which its job class {job_type.class_path!r} pushes: its runner would fail"
                    f' the push; add "{target}" to pushes of [types.{name}]'
                )
            else:
                problem = (
                    f"its job class {job_type.class_path!r} pushes {pushed}, a type not declared: declare"
                    f' [types.{target}] and add "{target}" to pushes of [types.{name}]'
                )
            raise ConfigError(declaration.source, f"types.{name}.pushes", problem)


def _is_factory(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", None) for d in method.decorator_list}
    return bool(names & {"classmethod", "staticmethod"})


def _literal_type(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name != _SPEC_CLASS:
        return None
    given = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "type"), None)
    return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else None
