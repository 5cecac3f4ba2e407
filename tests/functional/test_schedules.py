"""Schedules declared in jobs.toml: what the declaration accepts, and the
EventBridge Scheduler schedule the template makes of each (its target, its
role, and a body that is a job the runner takes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest

from jobkit.core.errors import ConfigError
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.declaration.schedules import fired_body, input_template
from jobkit.local.cloudformation import load_template

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
        # values AWS would refuse at deploy, or that would never fire
        ({"type": "digest", "cron": "99 3 * * ? *"}, "schedules.nightly.cron", "from 0 to 59"),
        ({"type": "digest", "cron": "0 3 32 * ? *"}, "schedules.nightly.cron", "from 1 to 31"),
        ({"type": "digest", "cron": "0 3 ? * 8 *"}, "schedules.nightly.cron", "from 1 to 7"),
        ({"type": "digest", "cron": "? 3 * * ? *"}, "schedules.nightly.cron", "not a value"),
        ({"type": "digest", "cron": "0 3 ? * ? *"}, "schedules.nightly.cron", "six cron fields"),  # two "?"
        ({"type": "digest", "cron": "0 3 ? * FRI-MON *"}, "schedules.nightly.cron", "lower value"),
        ({"type": "digest", "cron": "0 3 * * ? 2300"}, "schedules.nightly.cron", "1970 to 2199"),
        # params every firing would send as a poison message, or could not send at all
        ({"type": "digest", "rate": "1 hour", "params": {"n": float("inf")}}, "schedules.nightly.params", "JSON"),
        (
            {"type": "digest", "rate": "1 hour", "params": {"at": datetime(2026, 1, 1, tzinfo=UTC)}},
            "schedules.nightly.params",
            "no dates",
        ),
        ({"type": "digest", "rate": "1 hour", "params": {"s": "\ud800"}}, "schedules.nightly.params", "surrogate"),
        ({"type": "digest", "rate": "1 hour", "params": {"s": "x" * 300_000}}, "schedules.nightly.params", "262,144"),
        (
            {"type": "digest", "rate": "1 hour", "params": {"n": "<aws.scheduler.attempt-number>"}},
            "schedules.nightly.params",
            "would replace",
        ),
        (
            {"type": "digest", "rate": "1 hour", "domain": "<aws.scheduler.execution-id>"},
            "schedules.nightly.domain",
            "would replace",
        ),
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

    from jobkit.cli.ops import register_ops_commands
    from jobkit.core.clock import VirtualClock
    from jobkit.ops.config import CliConfig

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


def test_names_that_would_share_the_template_s_resources_are_refused() -> None:
    # the template names resources after them: one would silently replace the other on AWS
    with pytest.raises(ConfigError, match=r"nightly-digest.*nightlyDigest.*rename one"):
        parse_declaration(
            {
                "types": TYPES,
                "schedules": {
                    "nightlyDigest": {"type": "digest", "rate": "1 day"},
                    "nightly-digest": {"type": "digest", "rate": "1 day"},
                },
            },
            source="jobs.toml",
        )
    with pytest.raises(ConfigError, match=r"a_b.*aB|aB.*a_b"):
        parse_declaration({"types": {"a_b": {"class": "m:A"}, "aB": {"class": "m:B"}}}, source="jobs.toml")
    with pytest.raises(ConfigError, match=r"low_traffic.*lowTraffic|lowTraffic.*low_traffic"):
        parse_declaration(
            {"types": {"a": {"class": "m:A", "queue": "low_traffic"}, "b": {"class": "m:B", "queue": "lowTraffic"}}},
            source="jobs.toml",
        )
    # nor may a queue take the SQS name of another queue's DLQ, or of the schedules DLQ
    for queue in ("mail-dlq", "schedules"):
        with pytest.raises(ConfigError, match=r"types\.a\.queue"):
            parse_declaration({"types": {"a": {"class": "m:A", "queue": queue}}}, source="jobs.toml")


def test_a_firing_the_scheduler_cannot_send_goes_to_the_schedules_dlq_after_a_day_of_retries() -> None:
    template = load_template(ROOT / "template.yaml")
    dlq = template["Resources"]["SchedulesDeadLetterQueue"]
    assert dlq["Properties"]["SqsManagedSseEnabled"] is True
    assert template["Resources"]["SchedulesDeadLetterAlarm"]["Properties"]["Threshold"] == 0
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Scheduler::Schedule":
            target = resource["Properties"]["Target"]
            assert target["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": ["SchedulesDeadLetterQueue", "Arn"]}}
            assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}


def test_a_cron_only_aws_evaluates_leaves_the_local_stack_running(caplog: pytest.LogCaptureFixture) -> None:
    from jobkit.core.clock import VirtualClock
    from jobkit.local import LocalStack

    declaration = parse_declaration(
        {
            "types": {"noop": {"class": "testjobs:NoopJob"}},
            "schedules": {
                "monthEnd": {"type": "noop", "cron": "0 3 L * ? *"},  # valid on AWS, not evaluated locally
                "hourly": {"type": "noop", "rate": "1 hour"},
            },
        },
        source="jobs.toml",
    )
    start = 1_800_000_000.0
    with LocalStack(declaration, clock=VirtualClock(start)) as stack:
        stack.drain(until=start + 3 * 3600 + 1)
        ran = [r for r in stack.results.results if r.outcome.value == "succeeded"]
    assert len(ran) == 3  # the hourly schedule fired; the other one was left out, with a warning
    assert "monthEnd does not fire on the local stack" in caplog.text


def test_a_firing_the_scheduler_sends_twice_runs_once_in_the_example(example_declaration: Declaration) -> None:
    # EventBridge Scheduler may retry a send with a new execution ID: a new job ID, the
    # same params and scheduled time. The example's emailDigest must send one digest.
    from jobkit.core.clock import VirtualClock
    from jobkit.core.outcome import Outcome
    from jobkit.local import LocalStack

    schedule = example_declaration.schedules["nightlyDigest"]
    with LocalStack(example_declaration, clock=VirtualClock(1795312800.0 + 5)) as stack:
        url = stack.queue_url(example_declaration.types["emailDigest"].queue)
        for execution_id in ("d32c5kddcf5bb8c3", "e41f0a9b7c6d5e22"):
            stack.sqs.send_message(QueueUrl=url, MessageBody=fired_body(schedule, execution_id, "2026-11-22T02:00:00Z"))
            stack.clock.advance(60)
        stack.drain()
        outcomes = sorted(
            r.outcome for r in stack.results.results if r.job_type == "emailDigest" and r.outcome.is_final
        )
    assert outcomes == sorted([Outcome.SUCCEEDED, Outcome.DUPLICATE])


def test_jobkit_schedules_without_any_says_where_they_would_be_declared() -> None:
    import click
    from click.testing import CliRunner

    from jobkit.cli.ops import register_ops_commands
    from jobkit.ops.config import CliConfig

    group = click.Group("jobkit")
    register_ops_commands(group)
    config = CliConfig(config_path=ROOT / "tests" / "fixtures" / "jobs.toml")
    result = CliRunner().invoke(group, ["schedules"], obj=config)
    assert result.exit_code == 0, result.output
    assert "no schedules declared ([schedules.NAME] in jobs.toml)" in result.output
