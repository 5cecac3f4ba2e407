"""jobkit's performance budgets: each a figure of ``make bench``, a limit, and
whether the run met it. ``make bench`` fails if any is missed.

A budget is stated where a user pays: AWS requests per job (the bill and the
scaling limit), round trips a batch waits through (billed Lambda time), log
bytes per job (CloudWatch Logs), cold start (every new container), and the
local stack's speed at depth (every test run and demo).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Budget:
    name: str
    unit: str
    limit: float
    figure: Callable[[dict[str, Any]], float | None]  # from the results; None: not measured in this run

    def check(self, results: dict[str, Any]) -> dict[str, Any] | None:
        try:
            value = self.figure(results)
        except KeyError:
            value = None
        if value is None:
            return None
        return {"name": self.name, "value": value, "limit": self.limit, "unit": self.unit, "ok": value <= self.limit}


def _runner(kind: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: r["runner"]["jobkit"][kind]["dynamodb_requests_per_job"]


def _trips(kind: str) -> Callable[[dict[str, Any]], float]:
    return lambda r: r["round_trips"]["kinds"][kind]["round_trips_per_batch"]


BUDGETS = [
    Budget(
        "SQS requests per pushed job",
        "requests",
        0.1,
        lambda r: r["push"]["results"]["jobkit push()"]["sqs_requests_per_job"],
    ),
    Budget("DynamoDB requests per plain job", "requests", 0, _runner("plain")),
    Budget("DynamoDB requests per remove_duplicates job that runs", "requests", 2, _runner("remove_duplicates, runs")),
    Budget("DynamoDB requests per remove_duplicates duplicate", "requests", 1, _runner("remove_duplicates, duplicate")),
    Budget("DynamoDB requests per leaf job", "requests", 0.1, _runner("leaf")),
    Budget(
        "DynamoDB round trips per batch of 10 remove_duplicates jobs",
        "round trips",
        2,
        _trips("remove_duplicates, runs"),
    ),
    # its claims together, then each success marked done before the next job starts
    Budget("DynamoDB round trips per batch of 10 deliver_once jobs", "round trips", 11, _trips("deliver_once")),
    Budget(
        "DynamoDB requests per rate-limited job, a batch of one key",
        "requests",
        0.2,
        lambda r: r["flow"]["cases"]["rate limit, one key, under the limit"]["dynamodb_requests_per_job"],
    ),
    Budget(
        "DynamoDB requests per concurrency-limited job, a batch of one key",
        "requests",
        0.2,
        lambda r: r["flow"]["cases"]["concurrency, one key per batch"]["dynamodb_requests_per_job"],
    ),
    Budget("INFO lines per successful job", "lines", 1, lambda r: r["cost"]["assumptions"]["info_lines_per_job"]),
    Budget(
        "log bytes per successful job (JSON log and EMF)",
        "bytes",
        400,
        lambda r: r["cost"]["assumptions"]["log_bytes_per_job"],
    ),
    Budget(
        "cold start (import and build) vs Powertools BatchProcessor + Idempotency",
        "x",
        1.0,
        lambda r: r["coldstart"]["import_and_build_vs_powertools"],
    ),
    Budget(
        "cold start (import and build) vs import boto3 and one client",
        "x",
        1.25,
        lambda r: r["coldstart"]["import_and_build_ratio"],
    ),
    Budget(
        "local stack: ms per job pushed with 100,000 queued",
        "ms",
        2,
        lambda r: r["local_depth"]["push_ms_per_job_at_100k"],
    ),
    Budget(
        "local stack: ms per job drained with 100,000 queued",
        "ms",
        2,
        lambda r: r["local_depth"]["drain_ms_per_job_at_100k"],
    ),
    Budget(
        "make soak: 50,000 jobs at 5% faults",
        "s",
        180,
        lambda r: r["soak"]["wall_s"] if r["soak"]["jobs"] >= 50_000 else None,
    ),
]


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per budget measured in this run: name, value, limit, unit, ok."""
    return [entry for budget in BUDGETS if (entry := budget.check(results)) is not None]


def missed(budgets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in budgets if not entry["ok"]]
