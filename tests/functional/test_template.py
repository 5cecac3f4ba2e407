"""template.yaml: generated from the declaration, lint-clean before and after
translation, least-privilege, and the same stack the local stack runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint
from click.testing import CliRunner

from jobkit import JobSpecification
from jobkit.cli import main
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import ConfigError
from jobkit.core.outcome import Outcome
from jobkit.declaration.config import Declaration, load_declaration, parse_declaration
from jobkit.local import LocalStack
from jobkit.local.cloudformation import load_template, translate
from jobkit.records.keys import Kind, partition_key
from jobkit.template import LOG_RETENTION_DAYS, build, load_extra, logical_id, render
from jobkit.template.naming import QueueIds
from jobkit.template.resources import runner_description

from conftest import FIXTURES, ROOT, START

TEMPLATE = ROOT / "template.yaml"
CONSUME = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    return translate(load_template(TEMPLATE), parameters={"Prefix": "jobkit"})


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


# -- generation ---------------------------------------------------------------------------------


def test_the_committed_template_is_current(example_declaration: Declaration) -> None:
    assert TEMPLATE.read_text() == render(example_declaration, load_extra(ROOT / "infra" / "template-extra.yaml"))


def test_check_fails_on_a_stale_template(tmp_path: Path) -> None:
    stale = tmp_path / "template.yaml"
    stale.write_text(TEMPLATE.read_text().replace("MemorySize: 256", "MemorySize: 512", 1))
    config = ["--config", str(ROOT / "infra" / "jobs.toml"), "--extra", str(tmp_path / "none.yaml")]
    result = CliRunner().invoke(main, ["template", "--check", "--output", str(stale), *config])
    assert result.exit_code == 1 and "stale" in result.output
    assert CliRunner().invoke(main, ["template", "--output", str(stale), *config]).exit_code == 0
    assert CliRunner().invoke(main, ["template", "--check", "--output", str(stale), *config]).exit_code == 0


def test_extra_resources_are_merged_and_never_overwritten(tmp_path: Path, example_declaration: Declaration) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        "Resources:\n  Uploads:\n    Type: AWS::S3::Bucket\nOutputs:\n  UploadsBucket:\n    Value: !Ref Uploads\n"
    )
    template = build(example_declaration, load_extra(extra))
    assert template["Resources"]["Uploads"] == {"Type": "AWS::S3::Bucket"}
    assert template["Outputs"]["UploadsBucket"] == {"Value": {"Ref": "Uploads"}}
    extra.write_text("Resources:\n  JobsTable:\n    Type: AWS::S3::Bucket\n")
    with pytest.raises(ConfigError, match=r"Resources\.JobsTable"):
        build(example_declaration, load_extra(extra))
    extra.write_text("Transform: Nope\n")
    with pytest.raises(ConfigError, match="Transform"):
        load_extra(extra)


def test_a_queue_whose_environment_would_overflow_is_refused() -> None:
    types = {
        f"t{n}": {"class": "m:C", "queue": "shared", "remove_duplicates_ignore_params": ["x" * 60] * 5}
        for n in range(12)
    }
    with pytest.raises(ConfigError, match="environment"):
        build(parse_declaration({"types": types}, source="jobs.toml"))


# -- linting ---------------------------------------------------------------------------------------


def test_cfn_lint_is_clean_on_the_template() -> None:
    assert [str(m) for m in lint(TEMPLATE.read_text(), config=ManualArgs(regions=["us-east-1"]))] == []


def test_cfn_lint_is_clean_on_the_translated_template(translated: dict[str, Any]) -> None:
    # Some rules (e.g. the queue's visibility timeout against the function timeout)
    # only see the resources SAM generates.
    matches = lint(json.dumps(translated), config=ManualArgs(regions=["us-east-1"]))
    assert [str(m) for m in matches] == []


# -- least privilege and encryption -----------------------------------------------------------------


def statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for policy in role["Properties"].get("Policies", []):
        for statement in policy["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources_ = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            found.append({**statement, "Action": actions, "Resource": resources_})
    return found


def test_no_sqs_or_dynamodb_action_is_granted_on_everything(translated: dict[str, Any]) -> None:
    roles = resources(translated, "AWS::IAM::Role")
    assert roles
    for name, role in roles.items():
        for statement in statements(role):
            data_plane = [a for a in statement["Action"] if a.split(":")[0] in {"sqs", "dynamodb"}]
            if data_plane:
                assert "*" not in statement["Resource"], (name, statement)
                assert all(a not in {"sqs:*", "dynamodb:*"} for a in data_plane), (name, statement)


def test_each_runner_is_limited_to_its_own_queues(translated: dict[str, Any], example_declaration: Declaration) -> None:
    for queue in example_declaration.queues.values():
        q = logical_id(queue.name)
        role = translated["Resources"][f"{q}RunnerRole"]
        granted: dict[str, set[str]] = {}
        for statement in statements(role):
            for action in statement["Action"]:
                for resource in statement["Resource"]:
                    granted.setdefault(action, set()).add(json.dumps(resource, sort_keys=True))
        # its queue's own lane and each priority lane: a queue and a DLQ each
        lanes = [logical_id(lane.key) for lane in queue.lanes]
        own = {json.dumps({"Fn::GetAtt": [f"{lane}Queue", "Arn"]}, sort_keys=True) for lane in lanes}
        dlqs = {json.dumps({"Fn::GetAtt": [f"{lane}DeadLetterQueue", "Arn"]}, sort_keys=True) for lane in lanes}
        for action in CONSUME:
            assert granted[action] == own
        pushes = {
            example_declaration.types[t].queue for name in queue.types for t in example_declaration.types[name].pushes
        }
        allowed = {
            json.dumps({"Fn::GetAtt": [f"{logical_id(lane.key)}Queue", "Arn"]}, sort_keys=True)
            for p in pushes
            for lane in example_declaration.queues[p].lanes
        }
        assert granted["sqs:SendMessage"] == own | dlqs | allowed
        table = json.dumps({"Fn::GetAtt": ["JobsTable", "Arn"]}, sort_keys=True)
        assert {r for a, rs in granted.items() if a.startswith("dynamodb:") for r in rs} == {table}


def test_every_queue_is_encrypted_and_every_job_queue_has_a_dlq(translated: dict[str, Any]) -> None:
    queues = resources(translated, "AWS::SQS::Queue")
    assert queues
    for name, queue in queues.items():
        properties = queue["Properties"]
        assert properties.get("SqsManagedSseEnabled") or properties.get("KmsMasterKeyId"), name
        # set on every queue: one created before SQS's 1 MiB keeps 256 KiB unless told
        assert properties["MaximumMessageSize"] == 1_048_576, name
        if not name.endswith("DeadLetterQueue"):
            assert properties["RedrivePolicy"]["deadLetterTargetArn"] == {
                "Fn::GetAtt": [name.replace("Queue", "DeadLetterQueue"), "Arn"]
            }


def test_the_table_is_encrypted_on_demand_with_ttl_and_recovery(translated: dict[str, Any]) -> None:
    [table] = resources(translated, "AWS::DynamoDB::Table").values()
    properties = table["Properties"]
    assert properties["SSESpecification"] == {"SSEEnabled": True}
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    # kept on delete and replacement, but not by a first create that fails (a retry would
    # then fail on the kept table's name)
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")


def test_runners_get_their_declaration_and_event_source(
    translated: dict[str, Any], example_declaration: Declaration
) -> None:
    functions = resources(translated, "AWS::Lambda::Function")
    mappings = resources(translated, "AWS::Lambda::EventSourceMapping")
    for queue in example_declaration.queues.values():
        q = logical_id(queue.name)
        function = functions[f"{q}Runner"]["Properties"]
        assert (function["Runtime"], function["Architectures"]) == ("python3.12", ["arm64"])
        assert (function["Timeout"], function["MemorySize"]) == (queue.timeout_s, queue.memory_mb)
        variables = function["Environment"]["Variables"]
        runner_declaration = parse_declaration(json.loads(variables["JOBKIT_DECLARATION"]), source="env")
        assert set(queue.types) <= set(runner_declaration.types)
        assert variables["JOBKIT_QUEUE"] == queue.name  # the declared queue, not its SQS name
        # one mapping per lane: the queue's own, with its max_concurrency, and each priority lane's
        own = [m["Properties"] for m in mappings.values() if m["Properties"]["FunctionName"] == {"Ref": f"{q}Runner"}]
        assert len(own) == len(queue.lanes)
        for mapping, lane in zip(own, queue.lanes, strict=True):
            assert mapping["EventSourceArn"] == {"Fn::GetAtt": [f"{logical_id(lane.key)}Queue", "Arn"]}
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            assert mapping["BatchSize"] == queue.batch_size
            assert mapping["ScalingConfig"] == {"MaximumConcurrency": lane.max_concurrency}
        assert queue.lanes[0].max_concurrency == queue.max_concurrency


def test_each_runner_logs_to_a_log_group_that_expires(
    translated: dict[str, Any], example_declaration: Declaration
) -> None:
    parameter = translated["Parameters"]["LogRetentionDays"]
    assert (parameter["Type"], parameter["Default"]) == ("Number", 30)
    assert parameter["AllowedValues"] == list(LOG_RETENTION_DAYS) and 30 in LOG_RETENTION_DAYS
    functions = resources(translated, "AWS::Lambda::Function")
    groups = resources(translated, "AWS::Logs::LogGroup")
    assert len(groups) == len(example_declaration.queues) + 1  # and the push endpoint's
    endpoint = groups["PushEndpointLogGroup"]["Properties"]
    assert endpoint["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert endpoint["LogGroupName"] == {"Fn::Sub": "/aws/lambda/${Prefix}-push-endpoint"}
    for queue in example_declaration.queues.values():
        q = logical_id(queue.name)
        group = groups[f"{q}RunnerLogGroup"]["Properties"]
        assert group["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        function = functions[f"{q}Runner"]["Properties"]
        # the name Lambda would give the function's group, and the function says so too
        assert group["LogGroupName"] == {"Fn::Sub": f"/aws/lambda/${{Prefix}}-runner-{queue.name}"}
        assert function["FunctionName"] == {"Fn::Sub": f"${{Prefix}}-runner-{queue.name}"}
        assert function["LoggingConfig"] == {"LogGroup": {"Ref": f"{q}RunnerLogGroup"}}


# -- the template's stack on moto ----------------------------------------------------------------------


@pytest.fixture
def template_stack(example_declaration: Declaration) -> Iterator[LocalStack]:
    with LocalStack(example_declaration, clock=VirtualClock(START), template=TEMPLATE) as stack:
        yield stack


def queue_settings(stack: LocalStack) -> dict[str, dict[str, Any]]:
    settings = {}
    for name, url in stack.queue_urls.items():
        attributes = stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attributes.get("RedrivePolicy", "{}"))
        settings[name] = {
            "VisibilityTimeout": attributes["VisibilityTimeout"],
            "MessageRetentionPeriod": attributes["MessageRetentionPeriod"],
            "SqsManagedSseEnabled": attributes.get("SqsManagedSseEnabled"),
            "MaximumMessageSize": attributes.get("MaximumMessageSize"),
            "maxReceiveCount": redrive.get("maxReceiveCount"),
            "deadLetterTarget": redrive.get("deadLetterTargetArn", "").rsplit(":", 1)[-1],
        }
    return settings


def table_settings(stack: LocalStack) -> dict[str, Any]:
    name = stack.declaration.table_name
    table = stack.dynamodb.describe_table(TableName=name)["Table"]
    ttl = stack.dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    return {
        "KeySchema": table["KeySchema"],
        "AttributeDefinitions": sorted(table["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "BillingMode": table["BillingModeSummary"]["BillingMode"],
        "TTL": (ttl["TimeToLiveStatus"], ttl.get("AttributeName")),
    }


def test_the_template_stack_and_the_local_stack_agree(
    template_stack: LocalStack, example_declaration: Declaration
) -> None:
    from_template = (queue_settings(template_stack), table_settings(template_stack))
    template_stack.stop()
    with LocalStack(example_declaration, clock=VirtualClock(START)) as direct:
        assert (queue_settings(direct), table_settings(direct)) == from_template
    assert from_template[1]["TTL"] == ("ENABLED", "expires_at")
    assert from_template[0]["jobkit-refreshLinks"]["deadLetterTarget"] == "jobkit-refreshLinks-dlq"


def test_every_runner_allows_its_chains_and_alarms_if_lambda_drops_them(
    template_stack: LocalStack, translated: dict[str, Any], example_declaration: Declaration
) -> None:
    # Lambda's recursive loop detection would stop delay hops and fan-outs at their 16th round
    for queue in example_declaration.queues:
        ids = QueueIds(queue)
        assert translated["Resources"][ids.runner]["Properties"]["RecursiveLoop"] == "Allow"
        alarm = translated["Resources"][ids.recursion_alarm]["Properties"]
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", "RecursiveInvocationsDropped")
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": ids.runner}}]
        # the local stack deployed from the template takes its setting from it
        assert template_stack.mappings[queue].recursion.recursive_loop == "Allow"


def test_the_template_stack_has_expiring_log_groups_and_a_producer_policy(template_stack: LocalStack) -> None:
    logs = template_stack.client("logs")
    groups = logs.describe_log_groups(logGroupNamePrefix="/aws/lambda/jobkit-runner-")["logGroups"]
    assert {(g["logGroupName"], g.get("retentionInDays")) for g in groups} == {
        (f"/aws/lambda/jobkit-runner-{queue}", 30) for queue in template_stack.declaration.queues
    }
    arn = template_stack.stack_outputs["ProducerPolicyArn"]
    iam = template_stack.client("iam")
    policy = iam.get_policy(PolicyArn=arn)["Policy"]
    assert policy["PolicyName"] == "jobkit-producer"
    version = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])["PolicyVersion"]
    statements = version["Document"]["Statement"]  # botocore decodes the document
    # the example's batches (an edit's, with editReached, which tracks its status) add what keeping them needs
    others = ("ReadJobStatus", "KeepBatches", "WriteParams")
    [send, roots, invoke] = [s for s in statements if s.get("Sid") not in others]
    assert {s.get("Sid") for s in statements} >= set(others)
    # the push endpoint (IAM auth): both actions a function URL asks for, on its function only
    assert invoke["Action"] == ["lambda:InvokeFunctionUrl", "lambda:InvokeFunction"]
    assert invoke["Resource"].endswith(":function:jobkit-push-endpoint")
    assert sorted(send["Resource"]) == sorted(
        template_stack.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for name, url in template_stack.queue_urls.items()
        if not name.endswith("-dlq")
    )
    assert roots["Resource"].endswith(":table/jobkit-jobs")


def test_jobs_run_through_the_resources_the_template_created(template_stack: LocalStack) -> None:
    group = template_stack.queue_group("enwiki")
    group.push([JobSpecification("refreshLinks", {"title": "A"}), JobSpecification("refreshLinks", {"title": "A"})])
    group.push(JobSpecification("refreshLinks", {"title": "Module:Broken"}))
    group.push(JobSpecification("enotifNotify", {"recipient": "a@example.org", "page": "A", "editor": "B"}))
    template_stack.clock.advance(1)
    template_stack.drain()
    outcomes = template_stack.results.outcomes()
    assert outcomes[Outcome.SUCCEEDED] == 2 and outcomes[Outcome.DUPLICATE] == 1
    assert outcomes[Outcome.DEAD_LETTERED] == 1
    [dead] = template_stack.dead_letters("refreshLinks")
    assert dead["MessageAttributes"]["jobkit.reason"]["StringValue"] == "attempts_exhausted"
    records = template_stack.dynamodb.scan(TableName=template_stack.stack_outputs["JobsTableName"])["Items"]
    assert any(item["pk"]["S"].startswith(partition_key("refreshLinks", Kind.DUPLICATE, "")) for item in records)
    assert any(item["pk"]["S"].startswith(partition_key("refreshLinks", Kind.RUNS, "")) for item in records)


# -- flow control: the limit alarm; the busiest-domains rules --------------------------------------------


@pytest.fixture(scope="module")
def flow_template() -> dict[str, Any]:
    return build(load_declaration(FIXTURES / "flow.toml"))


def test_a_limited_type_has_an_alarm_on_a_limit_that_starves_it(flow_template: dict[str, Any]) -> None:
    alarms = resources(flow_template, "AWS::CloudWatch::Alarm")
    starved = {name.removesuffix("LimitStarvesAlarm") for name in alarms if name.endswith("LimitStarvesAlarm")}
    # the types with a concurrency or rate limit; not the debounced ones
    limited = {"Limited", "LimitedOpen", "HeldShort", "Rated", "RatedOpen", "Everything"}
    assert starved == limited | {"OnceLimited", "RootLimited", "SlowRated"}
    properties = alarms["RatedLimitStarvesAlarm"]["Properties"]
    assert properties["Namespace"] == "jobkit-flow" and properties["MetricName"] == "Limited"
    assert properties["Dimensions"] == [{"Name": "JobType", "Value": "rated"}]
    assert (properties["Statistic"], properties["Period"]) == ("Sum", 60)
    assert (properties["EvaluationPeriods"], properties["DatapointsToAlarm"]) == (15, 15)
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["Threshold"] == {"Ref": "LimitedAlarmPerMinute"}
    assert properties["TreatMissingData"] == "notBreaching"
    assert flow_template["Parameters"]["LimitedAlarmPerMinute"]["Default"] == 10
    # the example declaration has no limit: neither the alarm nor its (unused) parameter
    example = load_template(TEMPLATE)
    assert "LimitedAlarmPerMinute" not in example["Parameters"]
    assert not [n for n in example["Resources"] if n.endswith("LimitStarvesAlarm")]


def test_the_dashboard_shows_debounced_jobs_and_holds_of_limited_types(flow_template: dict[str, Any]) -> None:
    body = json.loads(flow_template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"])
    jobs = {
        w["properties"]["title"]: w["properties"]["metrics"]
        for w in body["widgets"]
        if "jobs" in w["properties"]["title"]
    }
    assert ["jobkit-flow", "Debounced", "JobType", "debounced"] in jobs["debounced: jobs"]
    assert ["jobkit-flow", "Limited", "JobType", "rated"] in jobs["rated: jobs"]
    assert not any(m[1] == "Limited" for m in jobs["debounced: jobs"])


def test_each_queue_has_a_rule_that_counts_its_succeeded_jobs_by_domain(translated: dict[str, Any]) -> None:
    rules = resources(translated, "AWS::CloudWatch::InsightRule")
    assert set(rules) == {"EnotifNotifyDomainsRule", "HtmlCacheUpdateDomainsRule", "RefreshLinksDomainsRule"}
    rule = rules["RefreshLinksDomainsRule"]
    assert rule["DependsOn"] == "RefreshLinksRunnerLogGroup"
    properties = rule["Properties"]
    assert properties["RuleName"] == {"Fn::Sub": "${Prefix}-domains-refreshLinks"}
    assert properties["RuleState"] == "ENABLED"
    body = json.loads(properties["RuleBody"]["Fn::Sub"])
    assert body == {
        "Schema": {"Name": "CloudWatchLogRule", "Version": 1},
        "LogGroupNames": ["/aws/lambda/${Prefix}-runner-refreshLinks"],  # the runner's log group, by name
        "LogFormat": "JSON",
        "Contribution": {
            "Keys": ["$.job_type", "$.domain"],
            "Filters": [{"Match": "$.run_time_ms", "IsPresent": True}],
        },
        "AggregateOn": "Count",
    }
    log_group = translated["Resources"]["RefreshLinksRunnerLogGroup"]["Properties"]["LogGroupName"]
    assert log_group == {"Fn::Sub": "/aws/lambda/${Prefix}-runner-refreshLinks"}


def test_cfn_lint_is_clean_on_a_flow_control_template(flow_template: dict[str, Any]) -> None:
    translated = translate(flow_template, parameters={"Prefix": "flow"})
    assert [str(m) for m in lint(json.dumps(translated), config=ManualArgs(regions=["us-east-1"]))] == []


def test_a_runners_description_fits_lambdas_256_characters() -> None:
    # Five long type names on one queue: the description names as many as fit
    names = [f"{'a' * 60}{n}" for n in range(5)]
    types = {name: {"class": "m:C", "queue": "shared"} for name in names}
    declaration = parse_declaration({"types": types}, source="test")
    description = runner_description(declaration.queues["shared"])
    assert len(description) <= 256 and description.endswith("more"), description
    assert runner_description(parse_declaration({"types": {"t": {"class": "m:C"}}}, source="x").queues["t"]) == (
        "jobkit runner for queue t: t"
    )
