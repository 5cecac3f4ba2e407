"""Schedules declared in jobs.toml: what the declaration accepts, and the
EventBridge Scheduler schedule the template makes of each (its target, its
role, and a body that is a job the runner takes)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from jobkit.config import Declaration, parse_declaration
from jobkit.errors import ConfigError
from jobkit.local.cloudformation import load_template
from jobkit.schedules import fired_body, input_template
from jobkit.spec import JobSpecification

from conftest import ROOT

SCHEMA = json.loads((ROOT / "docs" / "job-spec.schema.json").read_text())
TYPES = {"digest": {"class": "m:Digest", "queue": "mail"}}


def declared(**schedule: Any) -> Declaration:
    return parse_declaration({"types": TYPES, "schedules": {"nightly": schedule}}, source="jobs.toml")


@pytest.mark.parametrize(
    ("schedule", "key", "message"),
    [
        ({"type": "nope", "rate": "1 hour"}, "schedules.nightly.type", "declared job type"),
        ({"type": "digest"}, "schedules.nightly", "exactly one of cron"),
        ({"type": "digest", "cron": "0 3 * * ? *", "rate": "1 hour"}, "schedules.nightly", "exactly one"),
        ({"type": "digest", "cron": "0 3 * * *"}, "schedules.nightly.cron", "six cron fields"),
        ({"type": "digest", "cron": "0 3 * * 1 *"}, "schedules.nightly.cron", "six cron fields"),  # no "?"
        ({"type": "digest", "rate": "1 hours"}, "schedules.nightly.rate", '"1 hour"'),
        ({"type": "digest", "rate": "0 minutes"}, "schedules.nightly.rate", "5 minutes"),
        ({"type": "digest", "rate": "1 hour", "timezone": "Mars/Olympus"}, "schedules.nightly.timezone", "IANA"),
        ({"type": "digest", "rate": "1 hour", "params": []}, "schedules.nightly.params", "a table"),
        (
            {"type": "digest", "rate": "1 hour", "params": {"rootJobSignature": "x"}},
            "schedules.nightly.params",
            "rootJobSignature",
        ),
        ({"type": "digest", "rate": "1 hour", "flexible_window_min": 0}, "schedules.nightly.flexible_window_min", "1"),
        ({"type": "digest", "rate": "1 hour", "when": "soon"}, "schedules.nightly.when", "unknown key"),
    ],
)
def test_a_bad_schedule_is_refused_with_its_key(schedule: dict[str, Any], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        declared(**schedule)
    assert f"jobs.toml: {key}:" in str(refused.value) and message in str(refused.value)


def test_each_firing_is_a_job_the_runner_takes_with_an_id_of_its_own() -> None:
    schedule = declared(
        type="digest", cron="0 3 * * ? *", timezone="Europe/Berlin", domain="enwiki", params={"to": "a@example.org"}
    ).schedules["nightly"]
    firings = [
        fired_body(schedule, "d32c5kddcf5bb8c3", "2026-11-22T02:00:00Z"),
        fired_body(schedule, "a81b9e0c7f3d2e11", "2026-11-23T02:00:00Z"),
    ]
    specs = []
    for body in firings:
        jsonschema.validate(json.loads(body), SCHEMA)  # what a producer in any language would check
        specs.append(JobSpecification.from_message(body))
    assert [s.id for s in specs] == ["sched-d32c5kddcf5bb8c3", "sched-a81b9e0c7f3d2e11"]
    assert specs[0].enqueued_at == 1795312800.0  # 2026-11-22T02:00:00Z
    assert (specs[0].type, specs[0].domain, specs[0].params) == ("digest", "enwiki", {"to": "a@example.org"})


def test_the_template_sends_the_example_schedule_straight_to_its_queue() -> None:
    template = load_template(ROOT / "template.yaml")
    resources = template["Resources"]
    schedule = resources["NightlyDigestSchedule"]["Properties"]
    assert schedule["ScheduleExpression"] == "cron(0 3 * * ? *)"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 15}
    target = schedule["Target"]
    assert target["Arn"] == {"Fn::GetAtt": ["EnotifNotifyQueue", "Arn"]}  # emailDigest shares the email queue
    # the input, with what the scheduler fills in, is a valid job spec
    body = target["Input"].replace("<aws.scheduler.execution-id>", "d32c5kddcf5bb8c3")
    body = body.replace("<aws.scheduler.scheduled-time>", "2026-11-22T02:00:00Z")
    jsonschema.validate(json.loads(body), SCHEMA)
    assert JobSpecification.from_message(body).type == "emailDigest"


def test_an_input_template_names_the_scheduler_context_only_where_it_fills_in() -> None:
    schedule = declared(type="digest", rate="1 hour").schedules["nightly"]
    body = json.loads(input_template(schedule))
    assert body["id"] == "sched-<aws.scheduler.execution-id>"
    assert body["enqueuedAt"] == "<aws.scheduler.scheduled-time>"
    assert "domain" not in body and body["params"] == {}


def test_jobkit_schedules_lists_each_schedule_with_its_next_firings() -> None:
    import click
    from click.testing import CliRunner

    from jobkit.cli.config import CliConfig
    from jobkit.cli.ops import register_ops_commands
    from jobkit.clock import VirtualClock

    group = click.Group("jobkit")
    register_ops_commands(group)
    clock = VirtualClock(1795312800.0 - 60)  # a minute before 2026-11-22T02:00:00Z, 03:00 in Berlin
    config = CliConfig(config_path=ROOT / "infra" / "jobs.toml", clock=clock)
    result = CliRunner().invoke(group, ["schedules", "--count", "2", "--json"], obj=config)
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)["schedules"]
    assert (row["schedule"], row["type"], row["timezone"]) == ("nightlyDigest", "emailDigest", "Europe/Berlin")
    assert row["next"] == [
        {"utc": "2026-11-22T02:00:00Z", "local": "2026-11-22T03:00+01:00"},
        {"utc": "2026-11-23T02:00:00Z", "local": "2026-11-23T03:00+01:00"},
    ]
    table = CliRunner().invoke(group, ["schedules"], obj=config, env={"COLUMNS": "200"})
    assert "nightlyDigest" in table.output and "2026-11-22 03:00+01:00" in table.output
