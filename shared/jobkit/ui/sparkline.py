"""A series as a small inline SVG, rendered on the server.

Inline SVG needs no script and no image request, and the Content-Security-
Policy allows it as it is (its colours come from the stylesheet, by class).
A gap (``None``) breaks the line; a series without a point draws nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH = 120
HEIGHT = 24
PAD = 2


def _points(values: Sequence[float | None], top: float) -> list[list[tuple[float, float]]]:
    """Runs of (x, y) points, split at gaps."""
    step = (WIDTH - 2 * PAD) / max(1, len(values) - 1)
    runs: list[list[tuple[float, float]]] = [[]]
    for n, value in enumerate(values):
        if value is None:
            if runs[-1]:
                runs.append([])
            continue
        y = HEIGHT - PAD - (value / top) * (HEIGHT - 2 * PAD) if top else HEIGHT - PAD
        runs[-1].append((round(PAD + n * step, 1), round(y, 1)))
    return [run for run in runs if run]


def _path(runs: list[list[tuple[float, float]]]) -> str:
    parts = []
    for run in runs:
        if len(run) == 1:  # a lone point: a short dash, so it shows
            (x, y) = run[0]
            run = [(x - 1, y), (x + 1, y)]
        parts.append("M" + " L".join(f"{x},{y}" for x, y in run))
    return " ".join(parts)


def sparkline(series: dict[str, Sequence[float | None]], *, label: str) -> Markup:
    """An SVG with a line per named series (its name is its CSS class), all on one scale.

    Args:
        series: name -> values, oldest first (``None``: no datapoint).
        label: what it shows, for screen readers and as a tooltip.
    """
    known = [v for values in series.values() for v in values if v is not None]
    top = max(known, default=0.0)
    lines = []
    for name, values in series.items():
        runs = _points(values, top)
        if runs:
            lines.append(f'<path class="{escape(name)}" d="{_path(runs)}"/>')
    return Markup(
        f'<svg class="sparkline" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<line class="baseline" x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}"/>'
        f"{''.join(lines)}</svg>"
    )
