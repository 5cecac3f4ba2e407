"""How an ops command prints its result: JSON for scripts, or a rich view.

rich is imported when something is printed, not with the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console, RenderableType


@dataclass(frozen=True)
class Output:
    """Prints a result as JSON or as a readable view."""

    as_json: bool

    def show(self, data: object, view: Callable[[], RenderableType]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            console().print(view())


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr)."""
    from rich.console import Console

    return Console(stderr=stderr)
