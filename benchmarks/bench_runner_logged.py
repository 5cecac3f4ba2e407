"""Runner CPU per plain job with the work a deployed runner really does: its
INFO line (Powertools' JSON logger) and its EMF metrics, flushed per batch;
against a Powertools BatchProcessor doing the same work: dispatch, one Logger
line and one metric per record, flushed per batch; and, reported beside it, the
same BatchProcessor checking each body as jobkit does, with a pydantic model
(what Powertools' parser utility does).

Each side runs in a fresh interpreter with stdout thrown away (where Lambda's
log lines and EMF documents go), built as a Lambda container builds it
(``jobkit.handler``, from the function's environment). A plain job that
succeeds needs no AWS request, so no AWS is needed. The two alternate, a round
each in a rotating order, after a warm-up round, and a ratio is the median of
the rounds' own ratios (paired), since this machine's speed drifts.

    python benchmarks/bench_runner_logged.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from typing import Any

from _common import runner_environment

JOBKIT = """
import sys, time, jobkit.handler
from jobkit import JobSpecification
from jobkit.testing import FakeLambdaContext, sqs_event
jobs, batch = int(sys.argv[1]), 10
events = [sqs_event([JobSpecification("plain", {"n": n}) for n in range(i, i + batch)])
          for i in range(0, jobs, batch)]
handler = jobkit.handler.handler
handler(events[0], FakeLambdaContext(timeout_s=60))  # the container's first batch builds the runner
cpu = time.process_time()
for event in events:
    assert not handler(event, FakeLambdaContext(timeout_s=60))["batchItemFailures"]
sys.stderr.write(str((time.process_time() - cpu) / jobs * 1e6))
"""

POWERTOOLS = """
import json, sys, time
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from jobkit import JobSpecification
from jobkit.testing import FakeLambdaContext, sqs_event
logger, metrics = Logger(service="jobs"), Metrics(namespace="jobs")
processor = BatchProcessor(event_type=EventType.SQS)
def record_handler(record):
    job = json.loads(record.body)
    logger.info("succeeded", extra={"job_id": job["id"], "job_type": job["type"]})
    metrics.add_metric(name="Succeeded", unit=MetricUnit.Count, value=1)
def handler(event, context):
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    metrics.flush_metrics()
    return response
jobs, batch = int(sys.argv[1]), 10
events = [sqs_event([JobSpecification("plain", {"n": n}) for n in range(i, i + batch)])
          for i in range(0, jobs, batch)]
handler(events[0], FakeLambdaContext(timeout_s=60))
cpu = time.process_time()
for event in events:
    assert not handler(event, FakeLambdaContext(timeout_s=60))["batchItemFailures"]
sys.stderr.write(str((time.process_time() - cpu) / jobs * 1e6))
"""


# The same, with the body checked as jobkit checks it (the fields, their shapes and
# patterns, no unknown field that is not an identifier) by a pydantic model, as
# Powertools' parser utility would: an anchor that does the validation too.
VALIDATING = POWERTOOLS.replace(
    "logger, metrics =",
    """from typing import Any, Literal
from pydantic import BaseModel, ConfigDict, Field
class Body(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    v: Literal[1, 2]
    id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,80}$")
    type: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
    domain: str | None = Field(default=None, min_length=1, max_length=255)
    params: dict[str, Any]
    enqueuedAt: float = Field(ge=0)
    releaseAt: float | None = None
    removeDuplicates: bool = False
    removeDuplicatesIgnoreParams: list[str] = []
logger, metrics =""",
).replace("job = json.loads(record.body)", "job = Body.model_validate_json(record.body).model_dump()")


def _environment() -> dict[str, str]:
    # a plain type: a job that succeeds makes no AWS request (no claim, no SQS call)
    return runner_environment(
        {"jobkit": {"prefix": "bench"}, "types": {"plain": {"class": "bench_jobs:NoopJob"}}}, "plain"
    )


def _cpu_us_per_job(code: str, jobs: int, env: dict[str, str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", code, str(jobs)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return float(done.stderr.strip().splitlines()[-1])


def run(jobs: int = 2_000, rounds: int = 5) -> dict[str, Any]:
    env = _environment()
    _cpu_us_per_job(JOBKIT, 100, env)  # a warm-up round: caches, bytecode
    _cpu_us_per_job(POWERTOOLS, 100, env)
    _cpu_us_per_job(VALIDATING, 100, env)
    jobkit: list[float] = []
    powertools: list[float] = []
    validating: list[float] = []
    for round_ in range(rounds):
        order = [(JOBKIT, jobkit), (POWERTOOLS, powertools), (VALIDATING, validating)]
        shift = round_ % len(order)
        for code, figures in order[shift:] + order[:shift]:
            figures.append(_cpu_us_per_job(code, jobs, env))
    return {
        "jobs": jobs,
        "rounds": rounds,
        "jobkit_cpu_us_per_job": round(statistics.median(jobkit), 1),
        "powertools_cpu_us_per_job": round(statistics.median(powertools), 1),
        "validating_powertools_cpu_us_per_job": round(statistics.median(validating), 1),
        "ratio": round(statistics.median(a / b for a, b in zip(jobkit, powertools, strict=True)), 3),
        "ratio_vs_validating": round(statistics.median(a / b for a, b in zip(jobkit, validating, strict=True)), 3),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
