"""jobkit's optional extras, and a clear error when one is missing.

``pip install jobkit-aws`` is enough to push jobs and to run them in Lambda.
The rest is optional:

``cli``
    the ``jobkit`` command (click, rich, PyYAML) and the layer build behind
    ``sam build`` (packaging)
``local``
    the local stack: ``jobkit local up``, ``jobkit demo`` and the ``jobkit_stack``
    pytest fixture (moto, boto3, the SAM translator); implies ``cli``

A part that needs an extra calls :func:`require` before it imports anything
from it, so a missing extra reads as the command to run, never as a bare
``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib.util

#: The modules each extra brings, by import name.
EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("click", "rich", "yaml", "packaging", "starlette", "jinja2", "uvicorn"),
    "local": ("click", "rich", "yaml", "packaging", "moto", "boto3", "samtranslator", "flask"),
}

DISTRIBUTION = "jobkit-aws"


class MissingExtra(ImportError):
    """A part of jobkit was used without the extra that brings its dependencies."""


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` can be imported.

    Args:
        extra: a key of :data:`EXTRAS`.
        feature: what needs it, for the message ("the jobkit command").
    """
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtra(
            f"{feature} needs the [{extra}] extra, which is not installed (missing: {', '.join(missing)}): "
            f"pip install '{DISTRIBUTION}[{extra}]'",
            name=missing[0],
        )
