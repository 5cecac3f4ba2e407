"""A rich table laid out for the width it is printed at.

Down to an 80-column terminal: names and counts are never broken, lists of
names wrap between words, long text folds and is cut to a few lines, and at
narrow widths headers get shorter and the least useful columns are left out
(the caption says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Column:
    """A column of a :class:`FittedTable`.

    Attributes:
        kind: how its cells may break when the table is narrow: ``"whole"``
            never (names, counts, durations: the header may still wrap),
            ``"words"`` between words only (a list of names), ``"text"``
            anywhere, down to ``floor`` characters (IDs, error messages).
        drop: at widths where not everything fits, columns are left out
            highest ``drop`` first; ``0``: never.
        short: its header when the table is narrower than its content.
        lines: a ``"text"`` cell squeezed into fewer characters than it has is
            cut to this many lines, ending in ``…``.
    """

    header: str
    kind: Literal["whole", "words", "text"] = "whole"
    justify: JustifyMethod = "left"
    drop: int = 0
    short: str | None = None
    floor: int = 12
    lines: int | None = None


@dataclass(frozen=True)
class FittedRow:
    cells: tuple[Text, ...]
    style: str | None = None


@dataclass
class FittedTable:
    """A table laid out for the width it is printed at (a rich renderable).

    Each column gets what its content needs if the table fits; otherwise the
    headers get short, ``"text"`` and ``"words"`` columns wrap down to what
    keeps their words (or ``floor`` characters) whole, and columns are left out,
    highest ``drop`` first, until the rest fits. Nothing is ever wider than the
    width given, and a ``"whole"`` cell is never broken while the table can fit.
    """

    columns: Sequence[Column]
    title: str | Text | None = None
    caption: Text | None = None
    #: Said under the table when the short headers are shown.
    legend: str | None = None
    rows: list[FittedRow] = field(default_factory=list)

    def add_row(self, *cells: str | Text, style: str | None = None) -> None:
        self.rows.append(FittedRow(tuple(Text(c) if isinstance(c, str) else c for c in cells), style))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width, console)

    def table(self, width: int, console: Console | None = None) -> Table:
        """The rich table for ``width`` columns of text."""
        shown = list(range(len(self.columns)))
        headers = [c.header for c in self.columns]
        squeezed = _overhead(len(shown)) + sum(self._natural(i, headers[i]) for i in shown) > width
        if squeezed:
            headers = [c.short or c.header for c in self.columns]
        while _overhead(len(shown)) + sum(self._minimum(i, headers[i]) for i in shown) > width:
            droppable = [i for i in shown if self.columns[i].drop]
            if not droppable:
                break  # the widest columns give way (_fill)
            shown.remove(max(droppable, key=lambda i: self.columns[i].drop))
        widths = _fill(
            [self._minimum(i, headers[i]) for i in shown],
            [self._natural(i, headers[i]) for i in shown],
            width - _overhead(len(shown)),
        )
        notes = [self.caption] if self.caption is not None else []
        if squeezed and self.legend:
            notes.append(Text(self.legend))
        hidden = [self.columns[i].header for i in range(len(self.columns)) if i not in shown]
        if hidden:
            notes.append(Text(f"not shown at this width: {', '.join(hidden)} (see --json)"))
        table = Table(title=self.title, caption=Text("\n").join(notes) if notes else None)
        for i, column_width in zip(shown, widths, strict=True):
            column = self.columns[i]
            table.add_column(headers[i], justify=column.justify, overflow="fold", width=column_width)
        for row in self.rows:
            cells = []
            for i, column_width in zip(shown, widths, strict=True):
                cell, lines = row.cells[i], self.columns[i].lines
                if lines is not None and _width(cell.plain) > column_width:
                    cell = _clip(cell, column_width, lines, console or Console(width=width))
                cells.append(cell)
            table.add_row(*cells, style=row.style)
        return table

    def _cells(self, index: int, header: str) -> list[str]:
        return [header, *(row.cells[index].plain for row in self.rows)]

    def _natural(self, index: int, header: str) -> int:
        return max(_width(text) for text in self._cells(index, header))

    def _minimum(self, index: int, header: str) -> int:
        column = self.columns[index]
        if column.kind == "whole":
            return max([_longest_word(header)] + [_width(row.cells[index].plain) for row in self.rows])
        if column.kind == "words":
            return max(_longest_word(text) for text in self._cells(index, header))
        return max(_longest_word(header), min(self._natural(index, header), column.floor))


def _overhead(columns: int) -> int:
    """What a rich table adds to its columns' text: a border either side and between, a space each side."""
    return 3 * columns + 1


def _width(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def _fill(minimums: list[int], naturals: list[int], room: int) -> list[int]:
    """Widths from ``minimums`` towards ``naturals``, the room left shared
    evenly among the columns that want more; where even the minimums do not
    fit, the widest columns give way first, so that short counts stay whole."""
    widths = list(minimums)
    while sum(widths) > room and max(widths, default=0) > 1:
        widths[widths.index(max(widths))] -= 1
    spare = room - sum(widths)
    wanting = [i for i, natural in enumerate(naturals) if natural > widths[i]]
    while spare > 0 and wanting:
        share = max(1, spare // len(wanting))
        for i in list(wanting):
            grant = min(share, naturals[i] - widths[i], spare)
            widths[i] += grant
            spare -= grant
            if widths[i] >= naturals[i]:
                wanting.remove(i)
            if not spare:
                break
    return widths


def _clip(cell: Text, width: int, lines: int, console: Console) -> Text:
    """``cell`` wrapped to ``width``, cut to ``lines`` lines ending in ``…``."""
    wrapped = cell.wrap(console, width, overflow="fold")
    if len(wrapped) <= lines:
        return cell
    kept = [line.copy() for line in wrapped[:lines]]
    last = kept[-1]
    last.rstrip()
    last.truncate(width - 1)
    last.append("…")
    return Text("\n").join(kept)
