"""Runner cold start: a fresh interpreter imports jobkit's runner handler
(``jobkit.handler``) and builds the runner as its first invocation does, against

- a Powertools handler doing the same work (BatchProcessor + Idempotency on
  DynamoDB, Logger, Metrics: ``powertools_handler.py``), and
- ``import boto3`` plus one client: the floor of any Python Lambda that calls AWS.

Lambda runs a function's code from read-only directories, where Python can
write no bytecode cache: the container with its DynamoDB client is also
measured so, from a read-only copy of jobkit and Powertools (as the layer
holds them) without bytecode, and with the unchecked hash-based bytecode that
``sam build`` ships (:mod:`jobkit.sam.bytecode`); and so is the Powertools
handler, as ``sam build`` ships it: no bytecode survives SAM's packaging, which
writes every file with a 1980 timestamp (aws/aws-lambda-builders#924). boto3
and botocore are the runtime's, with their bytecode, on every side.

Each repeat runs every statement once, in a rotating order, so drift hits all
alike; a ratio is the median of the repeats' own ratios (paired), not a ratio
of medians. jobkit's build makes no client: SQS's comes with the first job
that fails, is re-enqueued or pushes, DynamoDB's with the first that uses the
jobs table. So the figure for a container whose jobs use the table, with its
DynamoDB client made, is measured too.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, runner_environment

STATEMENTS = {
    "baseline": "import boto3; boto3.client('sqs', region_name='us-east-1')",
    "powertools": "import powertools_handler",
    "handler": "import jobkit.handler",
    "handler_and_build": "import jobkit.handler; jobkit.handler._runner()",
    "handler_build_and_table": (
        "import jobkit.handler; jobkit.handler._runner(); "
        "from jobkit.wiring import AwsClients; AwsClients().client('dynamodb')"
    ),
}
#: The same container, run from a read-only layer: without bytecode, and with what sam build ships.
LAYERS = {"read_only_no_bytecode": False, "read_only_shipped_bytecode": True}


def _layer(root: Path, bytecode: bool, *, jobkit: bool = True) -> Path:
    """jobkit (or the Powertools handler) and Powertools as Lambda holds them,
    read-only (the rest, boto3 among it, is the runtime's: its bytecode is there
    on Lambda too)."""
    ignored = shutil.ignore_patterns("__pycache__", "*.pyc")
    packages = Path(sysconfig.get_paths()["purelib"])
    if jobkit:
        shutil.copytree(ROOT / "shared" / "jobkit", root / "jobkit", ignore=ignored)
    else:
        root.mkdir(parents=True)
        shutil.copy(ROOT / "benchmarks" / "powertools_handler.py", root)
    shutil.copytree(packages / "aws_lambda_powertools", root / "aws_lambda_powertools", ignore=ignored)
    shutil.copy(packages / "typing_extensions.py", root)
    if bytecode:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(root)],
            check=True,
        )
    for path in [root, *root.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    return root


def _time(statement: str, env: dict[str, str]) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT / "functions" / "runner",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _paired(timings: dict[str, list[float]], name: str, against: str) -> float:
    return statistics.median(a / b for a, b in zip(timings[name], timings[against], strict=True))


def run(repeats: int = 15) -> dict[str, Any]:
    from jobkit.declaration.config import declaration_to_dict, load_declaration

    # what the template gives the runner of refreshLinks: its queue's types and those they push
    declaration = load_declaration(ROOT / "infra" / "jobs.toml").for_runner("refreshLinks")
    env = runner_environment(declaration_to_dict(declaration), "refreshLinks")
    runs = {name: (statement, env) for name, statement in STATEMENTS.items()}
    with tempfile.TemporaryDirectory() as scratch:
        for name, bytecode in LAYERS.items():
            layer = _layer(Path(scratch) / name, bytecode)
            pythonpath = os.pathsep.join([str(layer), str(ROOT / "benchmarks")])
            runs[name] = (STATEMENTS["handler_build_and_table"], {**env, "PYTHONPATH": pythonpath})
        # The Powertools handler as sam build ships it: no bytecode that survives packaging
        # (SAM writes its zips with 1980 timestamps: aws/aws-lambda-builders#924)
        handler = _layer(Path(scratch) / "powertools_read_only", False, jobkit=False)
        runs["powertools_read_only"] = ("import powertools_handler", {**env, "PYTHONPATH": str(handler)})
        names = list(runs)
        timings: dict[str, list[float]] = {name: [] for name in names}
        try:
            for repeat in range(repeats):
                shift = repeat % len(names)
                for name in names[shift:] + names[:shift]:
                    timings[name].append(_time(*runs[name]))
        finally:
            for path in Path(scratch).rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
    medians = {name: statistics.median(values) * 1000 for name, values in timings.items()}
    return {
        "repeats": repeats,
        "baseline_ms": medians["baseline"],
        "powertools_ms": medians["powertools"],
        "handler_import_ms": medians["handler"],
        "handler_import_and_build_ms": medians["handler_and_build"],
        "handler_with_table_client_ms": medians["handler_build_and_table"],
        "import_ratio": _paired(timings, "handler", "baseline"),
        "import_and_build_ratio": _paired(timings, "handler_and_build", "baseline"),
        "import_and_build_vs_powertools": _paired(timings, "handler_and_build", "powertools"),
        "with_table_client_vs_powertools": _paired(timings, "handler_build_and_table", "powertools"),
        "with_table_client_vs_baseline": _paired(timings, "handler_build_and_table", "baseline"),
        "read_only_no_bytecode_ms": medians["read_only_no_bytecode"],
        "read_only_shipped_bytecode_ms": medians["read_only_shipped_bytecode"],
        "shipped_bytecode_vs_none": _paired(timings, "read_only_shipped_bytecode", "read_only_no_bytecode"),
        "read_only_shipped_vs_powertools": _paired(timings, "read_only_shipped_bytecode", "powertools"),
        "powertools_read_only_ms": medians["powertools_read_only"],
        "as_lambda_runs_it_vs_powertools": _paired(timings, "read_only_shipped_bytecode", "powertools_read_only"),
        "as_lambda_runs_it_vs_baseline": _paired(timings, "read_only_shipped_bytecode", "baseline"),
    }


if __name__ == "__main__":
    print(json.dumps(run(7), indent=2))
