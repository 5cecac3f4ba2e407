"""The benchmark's budgets: a figure over its limit is missed; one the run did
not measure is listed as not measured, and fails a full run (not a small one);
the soak is judged against the machine's own speed, measured in the same run."""

from __future__ import annotations

import sys
from typing import Any

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import budgets


def results(**overrides: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "push": {
            "results": {
                "jobkit push()": {"sqs_requests_per_job": 0.1, "client_cpu_us_per_job": 200.0},
                "bare send_message_batch loop": {"sqs_requests_per_job": 0.1, "client_cpu_us_per_job": 190.0},
            }
        },
        "runner": {
            "jobkit": {
                "plain": {"dynamodb_requests_per_job": 0.0},
                "remove_duplicates, runs": {"dynamodb_requests_per_job": 2.0},
                "remove_duplicates, duplicate": {"dynamodb_requests_per_job": 1.0},
                "leaf": {"dynamodb_requests_per_job": 0.0005},
                "cancellable, nothing cancelled": {"dynamodb_requests_per_job": 0.1},
                "batch member, pushed": {"dynamodb_requests_per_job": 0.8, "dynamodb_writes_per_job": 1.9},
                "batch member, ends": {"dynamodb_requests_per_job": 1.1, "dynamodb_writes_per_job": 2.0},
                "priority lane, runs": {"dynamodb_requests_per_job": 0.0, "sqs_requests_per_job": 0.0},
            },
            "lane_push": {"sqs_requests_per_job": 0.1},
        },
        "runner_logged": {"ratio": 0.9},
        "side_by_side": {"throughput_vs_powertools": 9.8, "billed_vs_powertools": 0.1},
        "round_trips": {
            "kinds": {
                "remove_duplicates, runs": {"round_trips_per_batch": 2},
                "deliver_once": {"round_trips_per_batch": 2},
            }
        },
        "cost": {"assumptions": {"info_lines_per_job": 1.0, "log_bytes_per_job": 343}},
        "coldstart": {
            "import_and_build_vs_powertools": 0.4,
            "import_and_build_ratio": 0.5,
            "with_table_client_vs_powertools": 0.9,
            "with_table_client_vs_baseline": 1.1,
            "shipped_bytecode_vs_none": 0.8,
            "as_lambda_runs_it_vs_powertools": 0.8,
            "as_lambda_runs_it_vs_baseline": 1.2,
        },
        "local_depth": {"push_ms_per_job_at_100k": 1.0, "drain_ms_per_job_at_100k": 1.5},
        "soak": {"jobs": 50_000, "wall_s": 150.0},
        "baseline": {"ms_per_message": 1.2},
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


def test_a_slow_soak_is_missed_against_the_machines_own_speed() -> None:
    # 406 s for 50,000 jobs is 8.1 ms a job: 6.8x a baseline of 1.2 ms a message
    [miss] = budgets.missed(budgets.evaluate(results(soak={"jobs": 50_000, "wall_s": 406.0})))
    assert miss["name"].startswith("make soak") and miss["value"] == 6.767 and miss["limit"] == 3.0
    # the same wall time on a machine running at a third of the speed is met
    slow_machine = results(soak={"jobs": 50_000, "wall_s": 406.0}, baseline={"ms_per_message": 3.6})
    assert budgets.missed(budgets.evaluate(slow_machine)) == []


def test_a_flow_control_figure_over_its_limit_is_missed() -> None:
    flow = {
        "cases": {
            "rate limit, one key, under the limit": {"dynamodb_requests_per_job": 1.0},
            "concurrency, one key per batch": {"dynamodb_requests_per_job": 0.2},
        }
    }
    [miss] = budgets.missed(budgets.evaluate(results(flow=flow)))
    assert miss["name"].startswith("DynamoDB requests per rate-limited job") and miss["limit"] == 0.2


def test_a_budget_this_run_did_not_measure_fails_a_full_run_only() -> None:
    figures = results(soak={"jobs": 500, "wall_s": 3.0})  # a smaller soak says nothing of the 50,000-job budget
    del figures["local_depth"]
    listed = budgets.evaluate(figures)
    unmeasured = [entry["name"] for entry in listed if entry["value"] is None]
    assert len(listed) == len(budgets.BUDGETS) and len(unmeasured) == 3
    assert all("soak" in n or "local stack" in n for n in unmeasured)
    assert {e["name"] for e in budgets.missed(listed)} == set(unmeasured)  # a full run fails on them
    assert budgets.missed(listed, complete=False) == []  # a --small run does not
