"""Runner cold start: importing the runner's handler (jobkit.handler) in a fresh interpreter,
against importing boto3 and creating one client (the floor every Python Lambda
that calls AWS pays). Also the first invocation's build of the runner (clients,
dedup store, metrics), which the handler does lazily. Medians of repeated runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

from _common import ROOT

BASELINE = "import boto3; boto3.client('sqs', region_name='us-east-1')"
HANDLER = "import jobkit.handler"
HANDLER_AND_BUILD = "import jobkit.handler; jobkit.handler._runner()"


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


def run(repeats: int = 15) -> dict[str, Any]:
    from jobkit.config import declaration_to_dict, load_declaration

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "shared"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "JOBKIT_DECLARATION": json.dumps(declaration_to_dict(load_declaration(ROOT / "infra" / "jobs.toml"))),
        "JOBKIT_QUEUE_URLS": "{}",
        "JOBKIT_QUEUE": "refreshLinks",
    }
    timings: dict[str, list[float]] = {"baseline": [], "handler": [], "handler_and_build": []}
    for _ in range(repeats):  # interleaved, so drift hits all three alike
        timings["baseline"].append(_time(BASELINE, env))
        timings["handler"].append(_time(HANDLER, env))
        timings["handler_and_build"].append(_time(HANDLER_AND_BUILD, env))
    medians = {name: statistics.median(values) * 1000 for name, values in timings.items()}
    return {
        "repeats": repeats,
        "baseline_ms": medians["baseline"],
        "handler_import_ms": medians["handler"],
        "handler_import_and_build_ms": medians["handler_and_build"],
        "import_ratio": medians["handler"] / medians["baseline"],
        "import_and_build_ratio": medians["handler_and_build"] / medians["baseline"],
    }


if __name__ == "__main__":
    print(json.dumps(run(7), indent=2))
