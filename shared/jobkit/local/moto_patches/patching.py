"""Setting attributes of moto's classes and modules for a while, and putting back what was there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any


@contextlib.contextmanager
def patched(patches: Iterable[tuple[Any, str, Any]]) -> Iterator[None]:
    """Set these attributes, and on the way out put back what was there (or nothing)."""
    missing = object()
    saved = [(owner, name, owner.__dict__.get(name, missing)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is missing:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
