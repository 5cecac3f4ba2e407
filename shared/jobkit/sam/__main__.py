"""``python -m jobkit.sam layer|runner``: what the generated Makefile runs under ``sam build``.

It takes plain arguments (no click), and prints one line on failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jobkit.core.errors import JobKitError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobkit.sam", description=__doc__)
    parser.add_argument("--expect-version", help="fail unless this jobkit version is installed")
    parser.add_argument("--makefile", type=Path, help="the generated Makefile; a relative --config is relative to it")
    commands = parser.add_subparsers(dest="command", required=True)
    layer = commands.add_parser("layer", help="build the jobkit layer")
    layer.add_argument("--to", type=Path, required=True, help="the artifacts directory ($ARTIFACTS_DIR)")
    runner = commands.add_parser("runner", help="build a runner function's code")
    runner.add_argument("--to", type=Path, required=True, help="the artifacts directory ($ARTIFACTS_DIR)")
    runner.add_argument("--config", type=Path, required=True, help="the job declaration (see --makefile)")
    arguments = parser.parse_args(argv)
    from jobkit.core.extras import MissingExtra, require

    try:
        require("cli", "building for sam build")
    except MissingExtra as exc:
        print(f"jobkit sam build: {exc}", file=sys.stderr)
        return 1
    try:
        from jobkit.sam.layer import check_version

        if arguments.expect_version:
            check_version(arguments.expect_version)
        if arguments.command == "layer":
            from jobkit.sam.layer import build_layer

            pins = build_layer(arguments.to)
            _compile(arguments.to / "python")
            print(f"jobkit layer: jobkit {_version()} and {', '.join(pins) or 'no other packages'}")
        else:
            from jobkit.declaration.config import load_declaration
            from jobkit.sam.runner import build_runner

            config = arguments.config
            if arguments.makefile is not None and not config.is_absolute():
                config = arguments.makefile.parent / config
            copied = build_runner(load_declaration(config), arguments.to)
            _compile(arguments.to)
            print(f"jobkit runner: {', '.join(copied)}")
    except JobKitError as exc:
        print(f"jobkit sam build: {exc}", file=sys.stderr)
        return 1
    return 0


def _compile(root: Path) -> None:
    """Bytecode for the runtime's Python; a build without it goes on, and says so."""
    from jobkit.sam.bytecode import compile_for_runtime

    problem = compile_for_runtime(root)
    if problem is not None:
        print(f"jobkit sam build: warning: {problem}")  # sam build shows a Makefile's stdout, not its stderr


def _version() -> str:
    import jobkit

    return jobkit.__version__


if __name__ == "__main__":
    sys.exit(main())
