"""The benchmark's budgets: a figure over its limit is missed, and one the run did not measure is not listed."""

from __future__ import annotations

import sys
from typing import Any

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import budgets


def results(**overrides: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "push": {"results": {"jobkit push()": {"sqs_requests_per_job": 0.1}}},
        "runner": {
            "jobkit": {
                "plain": {"dynamodb_requests_per_job": 0.0},
                "remove_duplicates, runs": {"dynamodb_requests_per_job": 2.0},
                "remove_duplicates, duplicate": {"dynamodb_requests_per_job": 1.0},
                "leaf": {"dynamodb_requests_per_job": 0.0005},
            }
        },
        "round_trips": {
            "kinds": {
                "remove_duplicates, runs": {"round_trips_per_batch": 2},
                "deliver_once": {"round_trips_per_batch": 2},
            }
        },
        "cost": {"assumptions": {"info_lines_per_job": 1.0, "log_bytes_per_job": 343}},
        "coldstart": {"import_and_build_vs_powertools": 0.4, "import_and_build_ratio": 0.5},
        "local_depth": {"push_ms_per_job_at_100k": 1.0, "drain_ms_per_job_at_100k": 1.5},
        "soak": {"jobs": 50_000, "wall_s": 150.0},
        "flow": {
            "cases": {
                "rate limit, one key, under the limit": {"dynamodb_requests_per_job": 0.1},
                "concurrency, one key per batch": {"dynamodb_requests_per_job": 0.2},
            }
        },
    }
    figures.update(overrides)
    return figures


def test_every_budget_is_listed_with_its_figure_and_met() -> None:
    listed = budgets.evaluate(results())
    assert len(listed) == len(budgets.BUDGETS)
    assert all(set(entry) == {"name", "value", "limit", "unit", "ok"} and entry["ok"] for entry in listed)
    assert budgets.missed(listed) == []


def test_a_figure_over_its_limit_is_missed() -> None:
    listed = budgets.evaluate(results(soak={"jobs": 50_000, "wall_s": 406.0}))
    [miss] = budgets.missed(listed)
    assert miss["name"].startswith("make soak") and miss["value"] == 406.0 and miss["limit"] == 180


def test_a_flow_control_figure_over_its_limit_is_missed() -> None:
    flow = {
        "cases": {
            "rate limit, one key, under the limit": {"dynamodb_requests_per_job": 1.0},
            "concurrency, one key per batch": {"dynamodb_requests_per_job": 0.2},
        }
    }
    [miss] = budgets.missed(budgets.evaluate(results(flow=flow)))
    assert miss["name"].startswith("DynamoDB requests per rate-limited job") and miss["limit"] == 0.2


def test_a_budget_this_run_did_not_measure_is_left_out() -> None:
    figures = results(soak={"jobs": 500, "wall_s": 3.0})  # a smaller soak says nothing of the 50,000-job budget
    del figures["local_depth"]
    names = [entry["name"] for entry in budgets.evaluate(figures)]
    assert len(names) == len(budgets.BUDGETS) - 3 and not any("soak" in n or "local stack" in n for n in names)
