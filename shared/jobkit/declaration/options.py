"""The keys of a ``[types.NAME]`` table, each declared by the feature it belongs to.

A feature lists its keys as :class:`TypeOption` values: the key, its default,
how it is read and written back, and the line of the reference that documents
it. :mod:`jobkit.declaration.config` composes the features' lists into a job type
(:data:`jobkit.declaration.config.TYPE_OPTIONS`); the commented reference of a
``jobs.toml`` is generated from them (:func:`reference`): ``jobkit init``
writes it, and ``make reference`` rewrites the example app's.

A new key is one :class:`TypeOption` in its feature's module and one field of
:class:`jobkit.declaration.config.JobType`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobkit.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Where:
    """Where a value was read: for error messages, and for paths relative to the file."""

    source: str
    key: str  # the dotted key, e.g. "types.refreshLinks.timeout_s"
    base_dir: Path | None = None

    def error(self, problem: str, *, sub: str | None = None) -> ConfigError:
        key = (f"{self.key}.{sub}" if self.key else sub) if sub else self.key
        return ConfigError(self.source, key, problem)

    def at(self, sub: str) -> Where:
        """The key ``sub`` inside this one."""
        return Where(self.source, f"{self.key}.{sub}" if self.key else sub, self.base_dir)

    def check(self, value: Any, ok: Callable[[Any], bool], expected: str) -> Any:
        """``value`` if ``ok(value)``, else a :class:`ConfigError` that says what was expected."""
        if not ok(value):
            raise self.error(f"{expected}, got {value!r}")
        return value


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class TypeOption:
    """One key of ``[types.NAME]``.

    Args:
        key: the key in jobs.toml.
        default: its value when the key is absent (as :attr:`parse` returns
            it); with ``default_is_name``, the type's name.
        parse: reads the TOML value (``Where`` names the key for errors).
        shown: what the reference shows after the key (``"= 3"``, ``"(required)"``).
        doc: the reference's text for it.
        field: the :class:`~jobkit.declaration.config.JobType` field (default: ``key``).
        to_toml: the value in its TOML shape (default: as is); ``None`` leaves
            the key out.
        in_defaults: whether ``[defaults]`` may set it.
        default_is_name: the default is the type's name.
    """

    key: str
    default: Any
    parse: Callable[[Where, Any], Any]
    shown: str
    doc: str
    field: str = ""
    to_toml: Callable[[Any], Any] = _as_is
    in_defaults: bool = True
    default_is_name: bool = False

    @property
    def attribute(self) -> str:
        return self.field or self.key

    def default_for(self, type_name: str) -> Any:
        return type_name if self.default_is_name else self.default

    def read(self, where: Where, table: Mapping[str, Any], type_name: str) -> Any:
        """The option's value in a type's table (its default when absent)."""
        if self.key not in table:
            return self.default_for(type_name)
        return self.parse(where.at(self.key), table[self.key])


# -- checks a parser is made of ------------------------------------------------------------------------


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def int_in(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def num_in(low: float, high: float) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high


def matches(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, str) and bool(pattern.fullmatch(v))


def str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def flag(key: str, doc: str, *, shown: str = "= false") -> TypeOption:
    """A true-or-false key, false by default."""
    return TypeOption(key, False, lambda where, raw: where.check(raw, is_bool, "must be true or false"), shown, doc)


def table(where: Where, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise where.error(f"must be a table, got {type(value).__name__}")
    return value


def no_unknown_keys(where: Where, found: Mapping[str, Any], allowed: Iterable[str]) -> None:
    allowed = set(allowed)
    for name in found:
        if name not in allowed:
            raise where.error(f"unknown key (allowed: {', '.join(sorted(allowed))})", sub=name)


# -- the reference ------------------------------------------------------------------------------------

#: The column a key's text starts in, and the width of the reference.
_TEXT_COLUMN, _WIDTH = 30, 104


def reference(options: Sequence[TypeOption]) -> str:
    """The commented reference of the keys, one entry each, in the style of
    the jobs.toml files jobkit ships: the key and its default, then its text,
    from the text column on (on the next line when the default is long)."""
    import textwrap  # here: only the reference needs it, never a runner's cold start

    indent = "#" + " " * (_TEXT_COLUMN - 1)
    lines = []
    for option in options:
        head = f"#   {option.key:<16} {option.shown}".rstrip()
        if len(head) < _TEXT_COLUMN - 1:
            head = f"{head:<{_TEXT_COLUMN}}"
        elif len(head) + 2 <= _TEXT_COLUMN + 20:
            head += "  "
        else:
            lines.append(head)
            head = indent
        lines += textwrap.wrap(
            option.doc, _WIDTH, initial_indent=head, subsequent_indent=indent, break_on_hyphens=False
        )
    return "\n".join(lines) + "\n"


def rewrite_reference(text: str, block: str) -> str:
    """``text`` (a jobs.toml) with its reference of the type keys replaced by
    ``block``: the lines from ``#   class`` to the first line that is not an
    indented comment."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("#   class ")), None)
    if start is None:
        raise ValueError("no reference of the type keys (a line starting '#   class ')")
    end = start
    while end < len(lines) and lines[end].startswith("#  ") and lines[end].strip() != "#":
        end += 1
    return "".join(lines[:start]) + block + "".join(lines[end:])


def write_reference(options: Sequence[TypeOption], *paths: str | Path) -> None:
    """Rewrite each jobs.toml's reference of the type keys from ``options``
    (``make reference`` does it for the example app's, with
    :data:`jobkit.declaration.config.TYPE_OPTIONS`)."""
    block = reference(options)
    for name in paths:
        path = Path(name)
        path.write_text(rewrite_reference(path.read_text(), block))
