"""The ``jobkit`` console script: the command line, or which extra to install for it."""

from __future__ import annotations

import sys

from jobkit.core.extras import MissingExtra


def main() -> None:
    try:
        from jobkit.cli import main as cli

        cli()  # a command that needs [local] (local up, demo) raises MissingExtra when it starts
    except MissingExtra as exc:
        sys.stderr.write(f"jobkit: {exc}\n")
        raise SystemExit(1) from None
