"""Runner cold start: a fresh interpreter imports jobkit's runner handler
(``jobkit.handler``) and builds the runner as its first invocation does, against

- a Powertools handler doing the same work (BatchProcessor + Idempotency on
  DynamoDB, Logger, Metrics: ``powertools_handler.py``), and
- ``import boto3`` plus one client: the floor of any Python Lambda that calls AWS.

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
import statistics
import subprocess
import sys
from typing import Any

from _common import ROOT

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

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "shared"), str(ROOT / "benchmarks")]),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_SERVICE_NAME": "jobs",
        "JOBKIT_DECLARATION": json.dumps(declaration_to_dict(load_declaration(ROOT / "infra" / "jobs.toml"))),
        "JOBKIT_QUEUE_URLS": "{}",
        "JOBKIT_QUEUE": "refreshLinks",
    }
    names = list(STATEMENTS)
    timings: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            timings[name].append(_time(STATEMENTS[name], env))
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
    }


if __name__ == "__main__":
    print(json.dumps(run(7), indent=2))
