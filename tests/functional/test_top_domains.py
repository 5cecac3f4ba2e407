"""``jobkit top --by domain``: a type's busiest domains, with no per-domain metric.

On AWS the figures come from each queue's Contributor Insights rule
(``GetInsightRuleReport``). moto keeps insight rules but does NOT implement
``GetInsightRuleReport`` (in-process it raises ``NotImplementedError``; served,
it answers HTTP 500). So:

- the cloud call is checked here with botocore's Stubber, which validates the
  request against CloudWatch's service model, and its answer is read as AWS
  gives it;
- on the local stack the same rule is applied by jobkit itself to the runner
  lines in the local CloudWatch Logs, which the local stack writes as a runner
  would; that path runs for real here, in-process and through a served stack;
- the rule itself is applied to the lines the real Lambda handler writes, so a
  change of the runner's log keys breaks a test, not the deployed rule.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber
from click.testing import CliRunner
from ops_cli import cli_for
from test_log_lines import TYPES as LOG_TYPES
from test_log_lines import _restore_logging, run_batch  # noqa: F401 - _restore_logging: a fixture

from jobkit import JobSpecification
from jobkit.cli.ops import register_ops_commands
from jobkit.core.clock import VirtualClock
from jobkit.core.metrics import EmfMetrics
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.local import LocalStack
from jobkit.ops.config import CliConfig
from jobkit.ops.domains import FROM_INSIGHTS, FROM_LOGS, busiest_domains
from jobkit.ops.insight_rules import evaluate
from jobkit.template.insight import domains_rule_definition

from conftest import FIXTURES, START

WINDOW_S = 300


def cloudwatch_on_aws() -> Any:
    """A CloudWatch client for AWS's endpoint (never called: stubbed)."""
    return botocore.session.get_session().create_client("cloudwatch", region_name="us-east-1")


def report(contributors: list[tuple[str, str, float]], total: float) -> dict[str, Any]:
    return {
        "KeyLabels": ["$.job_type", "$.domain"],
        "AggregationStatistic": "Sum",
        "AggregateValue": total,
        "ApproximateUniqueCount": len(contributors),
        "Contributors": [
            {
                "Keys": [job_type, domain],
                "ApproximateAggregateValue": value,
                "Datapoints": [{"Timestamp": datetime.fromtimestamp(START, UTC), "ApproximateValue": value}],
            }
            for job_type, domain, value in contributors
        ],
    }


# -- on AWS: GetInsightRuleReport, its request checked against the service model ---------------------


def test_the_cloud_call_asks_each_queues_rule_for_its_top_contributors(test_declaration: Declaration) -> None:
    cloudwatch = cloudwatch_on_aws()
    with Stubber(cloudwatch) as stub:
        stub.add_response(
            "get_insight_rule_report",
            report([("noop", "enwiki", 30.0), ("noop", "dewiki", 10.0)], total=50.0),
            {
                "RuleName": "test-domains-noop",
                "StartTime": datetime.fromtimestamp(START - WINDOW_S, UTC),
                "EndTime": datetime.fromtimestamp(START, UTC),
                "Period": 60,
                "MaxContributorCount": 10,
                "OrderBy": "Sum",
            },
        )
        found = busiest_domains(
            cloudwatch, None, test_declaration, now=START, window_s=WINDOW_S, job_type="noop", limit=10
        )
        stub.assert_no_pending_responses()
    assert found.source == FROM_INSIGHTS and found.notes == []
    assert [(d.domain, d.jobs, d.per_min, d.share) for d in found.lines] == [
        ("enwiki", 30.0, 6.0, 0.6),
        ("dewiki", 10.0, 2.0, 0.2),
    ]


def test_a_shared_queues_rule_is_read_once_for_its_types_and_shows_no_share(test_declaration: Declaration) -> None:
    cloudwatch = cloudwatch_on_aws()
    with Stubber(cloudwatch) as stub:
        contributors = [("rare", "a", 9.0), ("rarer", "b", 5.0), ("rare", "c", 4.0), ("rare", "d", 1.0)]
        stub.add_response(
            "get_insight_rule_report",
            report(contributors, total=19.0),
            {
                "RuleName": "test-domains-lowTraffic",
                "StartTime": datetime.fromtimestamp(START - WINDOW_S, UTC),
                "EndTime": datetime.fromtimestamp(START, UTC),
                "Period": 60,
                "MaxContributorCount": 6,  # 2 per type, for the queue's 3 types
                "OrderBy": "Sum",
            },
        )
        found = busiest_domains(
            cloudwatch, None, test_declaration, now=START, window_s=WINDOW_S, job_type="rare", limit=2
        )
    assert [(d.job_type, d.domain, d.share) for d in found.lines] == [("rare", "a", None), ("rare", "c", None)]


def test_a_missing_rule_is_a_note_not_a_crash(test_declaration: Declaration) -> None:
    cloudwatch = cloudwatch_on_aws()
    with Stubber(cloudwatch) as stub:
        stub.add_client_error("get_insight_rule_report", "ResourceNotFoundException", "Rule not found")
        found = busiest_domains(cloudwatch, None, test_declaration, now=START, window_s=WINDOW_S, job_type="noop")
    assert found.lines == []
    assert found.notes == [
        "domains of queue noop unavailable: no rule test-domains-noop (deploy the current template): "
        "An error occurred (ResourceNotFoundException) when calling the GetInsightRuleReport operation: "
        "Rule not found"
    ]


# -- the rule, on the lines the runner really writes --------------------------------------------------


@pytest.fixture
def chatty_stack() -> Iterator[LocalStack]:
    with LocalStack(parse_declaration({"types": LOG_TYPES}, source="test"), clock=VirtualClock()) as stack:
        yield stack


def test_the_rule_counts_the_runners_one_line_per_succeeded_job_by_domain(
    chatty_stack: LocalStack,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the JSON lines the Lambda handler writes for a batch of jobs in two
    # domains and one without a domain, and the EMF document of that batch
    specs = [JobSpecification("chatty", {"n": n}, domain="enwiki") for n in range(3)]
    specs += [JobSpecification("chatty", {"n": 9}, domain="dewiki"), JobSpecification("chatty", {"n": 10})]
    lines, _ = run_batch(chatty_stack, monkeypatch, capsys, caplog, "chatty", specs)
    emf = io.StringIO()
    metrics = EmfMetrics("jobkit", emf)  # the batch's document, as the runner writes it to the same log group
    metrics.record(RecordResult("m", "chatty", Outcome.SUCCEEDED, run_time_ms=1.0))
    metrics.flush()
    messages = [json.dumps(line) for line in lines] + emf.getvalue().splitlines()
    # When the rule is applied to them
    found = evaluate(domains_rule_definition("any"), messages, max_contributors=10)
    # Then each job with a domain is counted once, by type and domain; the EMF
    # document (RunTime, not run_time_ms) and the job without a domain are not
    assert [(c["Keys"], c["ApproximateAggregateValue"]) for c in found["Contributors"]] == [
        (["chatty", "enwiki"], 3.0),
        (["chatty", "dewiki"], 1.0),
    ]
    assert found["AggregateValue"] == 4.0


# -- on the local stack: the same rule over the local CloudWatch Logs ----------------------------------


@pytest.fixture
def published(test_declaration: Declaration) -> Iterator[LocalStack]:
    """A local stack that publishes, after noop jobs in three domains (and one
    without), a flaky job that failed once, and a duplicate."""
    with LocalStack(test_declaration, clock=VirtualClock(START), seed=1, publish_metrics=True) as stack:
        push(stack)
        yield stack


def push(stack: LocalStack) -> None:
    for domain, count in (("enwiki", 6), ("dewiki", 3), ("frwiki", 1)):
        stack.queue_group(domain).push([JobSpecification("noop", {"n": n}) for n in range(count)])
    stack.queue_group().push(JobSpecification("noop", {"n": 99}))
    stack.queue_group("enwiki").push(JobSpecification("flaky", {"fail_times": 1}))
    stack.drain()
    assert stack.metrics_publisher is not None
    stack.metrics_publisher.publish()


def test_top_by_domain_on_the_local_stack(published: LocalStack) -> None:
    jobkit = cli_for(published, columns=120, advance=False)
    frame = json.loads(jobkit("top", "--by", "domain", "--once", "--json").stdout)
    assert frame["source"] == FROM_LOGS and frame["notes"] == [] and frame["by"] == "domain"
    rows = [(d["type"], d["domain"], d["jobs"], d["per_min"], d["share"]) for d in frame["domains"]]
    assert rows == [
        ("flaky", "enwiki", 1.0, 0.2, 1.0),  # its failed attempt wrote no such line
        ("noop", "enwiki", 6.0, 1.2, 0.6),
        ("noop", "dewiki", 3.0, 0.6, 0.3),
        ("noop", "frwiki", 1.0, 0.2, 0.1),
    ]
    # one type, the top 2
    frame = json.loads(jobkit("top", "--by", "domain", "--type", "noop", "--limit", "2", "--once", "--json").stdout)
    assert [d["domain"] for d in frame["domains"]] == ["enwiki", "dewiki"] and frame["types"] == ["noop"]
    # the table, in the style of top's
    text = jobkit("top", "--by", "domain", "--type", "noop", "--once").stdout
    assert "jobkit top --by domain: last 5 min" in text
    assert text.index("enwiki") < text.index("dewiki") < text.index("frwiki")
    assert "60%" in text and "from the runners' log events" in text


def test_lines_older_than_the_window_are_not_counted(published: LocalStack) -> None:
    assert isinstance(published.clock, VirtualClock)
    published.clock.advance(WINDOW_S + 1)
    frame = json.loads(cli_for(published, advance=False)("top", "--by", "domain", "--once", "--json").stdout)
    assert frame["domains"] == [] and frame["notes"] == ["no job with a domain succeeded in the last 5 min"]


def test_top_by_domain_through_a_served_local_stack(test_declaration: Declaration) -> None:
    # `jobkit local up` serves the API on loopback: the endpoint says it is no AWS
    with LocalStack(test_declaration, clock=VirtualClock(START), seed=1, publish_metrics=True, server=True) as stack:
        push(stack)
        group = click_group()
        config = CliConfig(config_path=FIXTURES / "jobs.toml", endpoint_url=stack.endpoint_url, clock=stack.clock)
        result = CliRunner().invoke(group, ["top", "--by", "domain", "--type", "noop", "--once", "--json"], obj=config)
        assert result.exit_code == 0, result.output
        frame = json.loads(result.stdout)
        assert frame["source"] == FROM_LOGS
        assert [(d["domain"], d["jobs"]) for d in frame["domains"]] == [("enwiki", 6), ("dewiki", 3), ("frwiki", 1)]


def test_bad_combinations_are_usage_errors(published: LocalStack) -> None:
    jobkit = cli_for(published, advance=False)
    assert "only with --by domain" in jobkit("top", "--type", "noop", "--once", ok=False).output
    assert "no type 'nope'" in jobkit("top", "--by", "domain", "--type", "nope", "--once", ok=False).output


def click_group() -> Any:
    import click

    group = click.Group("jobkit")
    register_ops_commands(group)
    return group
