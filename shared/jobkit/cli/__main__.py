"""``python -m jobkit.cli``: the ``jobkit`` command."""

from __future__ import annotations

from jobkit.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
