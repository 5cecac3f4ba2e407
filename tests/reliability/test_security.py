"""Security: least privilege in the deployed template (managed policies
included), justified checkov exceptions, job classes resolved only from the
declaration, and params kept out of logs and dead-letter reasons."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobkit import JobSpecification
from jobkit.core.clock import VirtualClock
from jobkit.core.outcome import Outcome
from jobkit.core.resources import CANARY_TYPE, DLQ_RETENTION_S
from jobkit.core.spec import MAX_RELEASE_DELAY_S
from jobkit.declaration.config import Declaration, parse_declaration
from jobkit.jobs.canary import canary_type
from jobkit.local import LocalStack
from jobkit.local.cloudformation import load_template, translate
from jobkit.local.esm import sqs_event
from jobkit.records.keys import (
    Kind,
    cancel_records_pattern,
    kinds_used,
    partition_key,
    root_records_pattern,
    runner_records_patterns,
)
from jobkit.runner.registry import JobRegistry
from jobkit.template import CHECKOV_SKIPS, build, logical_id

from conftest import ROOT, START

TEMPLATE = ROOT / "template.yaml"
BASIC_EXECUTION_ROLE = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
SECRET = "s3cr3t-param-value"
RUNNER_TABLE_ACTIONS = {
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Query",
}
#: A declaration the example lacks: a shared queue, types that push types on other
#: queues, and type names that are prefixes of one another ("refresh", "refreshLinks").
CROSS_QUEUE = {
    "types": {
        "edit": {"class": "m:Edit", "pushes": ["refreshLinks", "htmlCacheUpdate", "edit"]},
        "refresh": {"class": "m:Refresh", "queue": "lowTraffic", "pushes": ["refreshLinks"]},
        "purge": {
            "class": "m:Purge",
            "queue": "lowTraffic",
            "concurrency": {"limit": 2},
            "track_status": True,
            "cancellable": True,
        },
        "digest": {
            "class": "m:Digest",
            "queue": "lowTraffic",
            "rate_limit": {"per_second": 5},
            "debounce": {"key": "params.user", "wait_s": 60},
            "deliver_once": True,
            "cancellable": True,
        },
        "refreshLinks": {"class": "m:RefreshLinks", "remove_duplicates": True},
        "htmlCacheUpdate": {"class": "m:HtmlCacheUpdate", "pushes": ["htmlCacheUpdate", "purge"]},
    }
}


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    return translate(load_template(TEMPLATE), parameters={"Prefix": "jobkit"})


@pytest.fixture(scope="module")
def deployments(translated: dict[str, Any], example_declaration: Declaration) -> list[tuple[Declaration, Any]]:
    """The example's committed template and a cross-queue declaration's, each translated."""
    cross = parse_declaration(CROSS_QUEUE, source="jobs.toml")
    return [
        (example_declaration, translated),
        (cross, translate(build(cross), parameters={"Prefix": "jobkit"})),
    ]


def roles(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The runner roles (the schedules' roles have a test of their own)."""
    return {
        name: r
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role" and name.endswith("RunnerRole")
    }


def test_every_role_is_a_runner_role_a_schedule_role_or_the_push_endpoints(translated: dict[str, Any]) -> None:
    names = [name for name, r in translated["Resources"].items() if r["Type"] == "AWS::IAM::Role"]
    assert names and all(name.endswith(("RunnerRole", "ScheduleRole")) or name == "PushEndpointRole" for name in names)


#: The example's endpoint takes no type that is cancellable or tracks its status: one
#: that takes some (tracked, cancellable, deliver_once) and not others just like them.
ENDPOINT_TAKES_SOME = {
    "types": {
        **CROSS_QUEUE["types"],
        "report": {"class": "m:Report", "track_status": True},
        "sweep": {
            "class": "m:Sweep",
            "queue": "lowTraffic",
            "track_status": True,
            "cancellable": True,
            "deliver_once": True,
        },
    },
    "push_endpoint": {"types": ["purge", "digest", "report", "refreshLinks"]},
}


@pytest.fixture(scope="module")
def endpoint_deployments(translated: dict[str, Any], example_declaration: Declaration) -> list[tuple[Declaration, Any]]:
    """The example's committed template, and one whose endpoint takes cancellable and tracked types."""
    some = parse_declaration(ENDPOINT_TAKES_SOME, source="jobs.toml")
    return [(example_declaration, translated), (some, translate(build(some), parameters={"Prefix": "jobkit"}))]


def test_the_push_endpoint_may_only_send_its_types_record_their_roots_and_cancel_and_read_them(
    endpoint_deployments: list[tuple[Declaration, Any]],
) -> None:
    for declaration, template in endpoint_deployments:
        assert declaration.push_endpoint is not None
        taken = declaration.push_endpoint.types
        role = template["Resources"]["PushEndpointRole"]["Properties"]
        managed = [arn["Fn::Sub"] if isinstance(arn, dict) else arn for arn in role.get("ManagedPolicyArns", [])]
        assert all(arn.endswith(":policy/service-role/AWSLambdaBasicExecutionRole") for arn in managed), managed
        statements = {s["Sid"]: s for policy in role["Policies"] for s in policy["PolicyDocument"]["Statement"]}
        own = declaration.for_endpoint()
        pop_batch_statements(statements, own, own.types, "PushEndpoint")
        cancellable = {t for t in taken if declaration.types[t].cancellable}
        tracked = {t for t in taken if declaration.types[t].track_status}
        assert set(statements) == {"SendToTakenTypesQueues", "RecordRootJobs", "WriteParams"} | (
            {"CancelJobs"} if cancellable else set()
        ) | ({"ReadJobStatus"} if cancellable | tracked else set())
        send = statements["SendToTakenTypesQueues"]
        assert as_list(send["Action"]) == ["sqs:SendMessage"]
        queues = sorted({declaration.types[t].queue for t in taken})
        lanes = [lane.key for q in queues for lane in declaration.queues[q].lanes]  # each with its priority lanes
        assert as_list(send["Resource"]) == [{"Fn::GetAtt": [f"{logical_id(k)}Queue", "Arn"]} for k in lanes]
        roots = statements["RecordRootJobs"]
        assert as_list(roots["Action"]) == ["dynamodb:UpdateItem"]
        # cancel and status: what group.cancel and group.status need, of the types it takes only
        cancel = statements.get("CancelJobs", {"Action": [], "Condition": {}})
        read = statements.get("ReadJobStatus", {"Action": [], "Condition": {}})
        if cancellable:
            assert as_list(cancel["Action"]) == ["dynamodb:PutItem", "dynamodb:UpdateItem"]
        if cancellable | tracked:
            assert as_list(read["Action"]) == ["dynamodb:GetItem"]
        for job_type, declared in declaration.types.items():
            for kind, key in every_key_of(job_type).items():
                assert may_touch(leading_keys(roots), key) == (kind is Kind.ROOT and job_type in taken), key
                writes = bool(cancel["Condition"]) and may_touch(leading_keys(cancel), key)
                assert writes == (kind is Kind.CANCEL and job_type in cancellable), key
                # read: its cancellations, and whether a job ended (status, delivery claims)
                readable = (
                    (kind is Kind.CANCEL and job_type in cancellable)
                    or (kind is Kind.STATUS and job_type in tracked)
                    or (kind is Kind.DELIVERY and job_type in cancellable and declared.deliver_once)
                )
                assert (bool(read["Condition"]) and may_touch(leading_keys(read), key)) == readable, key
        # IAM auth: only signed requests of principals allowed to invoke it
        [url] = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Url"]
        assert url["Properties"]["AuthType"] == "AWS_IAM"
        assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Permission"]
    # the second declaration takes what the example's endpoint does not: each case is checked
    some, _ = endpoint_deployments[1]
    kinds = {(t.cancellable, t.track_status, t.deliver_once) for t in some.for_endpoint().types.values()}
    assert {(True, True, False), (True, False, True), (False, True, False), (False, False, False)} <= kinds
    assert "sweep" not in some.for_endpoint().types and some.types["sweep"].cancellable


def test_an_hmac_push_endpoint_may_read_its_one_secret(example_declaration: Declaration) -> None:
    from dataclasses import replace

    from jobkit.endpoint.options import EndpointOptions

    options = EndpointOptions(("refreshLinks",), "hmac", "myapp/jobkit-push")
    template = translate(build(replace(example_declaration, push_endpoint=options)), parameters={"Prefix": "jobkit"})
    role = template["Resources"]["PushEndpointRole"]["Properties"]
    statements = {s["Sid"]: s for policy in role["Policies"] for s in policy["PolicyDocument"]["Statement"]}
    assert set(statements) == {"SendToTakenTypesQueues", "RecordRootJobs", "ReadProducerKey", "WriteParams"}
    secret = statements["ReadProducerKey"]
    assert as_list(secret["Action"]) == ["secretsmanager:GetSecretValue"]
    assert secret["Resource"]["Fn::Sub"].endswith(":secret:myapp/jobkit-push-??????")
    [url] = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Url"]
    assert url["Properties"]["AuthType"] == "NONE"  # the endpoint checks the producer signature itself
    # and the producer policy does not name a function nobody signs for
    producer = template["Resources"]["ProducerPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert "InvokePushEndpoint" not in {s["Sid"] for s in producer}


def test_a_schedule_may_only_send_to_its_own_types_queue_and_the_schedules_dlq(translated: dict[str, Any]) -> None:
    schedules = {n: r for n, r in translated["Resources"].items() if r["Type"] == "AWS::Scheduler::Schedule"}
    assert schedules, "the example declares a schedule"
    for name, schedule in schedules.items():
        target = schedule["Properties"]["Target"]
        role = translated["Resources"][target["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
        [assume] = role["AssumeRolePolicyDocument"]["Statement"]
        assert assume["Principal"] == {"Service": "scheduler.amazonaws.com"}, name
        assert assume["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}, name
        assert "ManagedPolicyArns" not in role, name
        [policy] = role["Policies"]
        [statement] = policy["PolicyDocument"]["Statement"]
        assert (statement["Effect"], statement["Action"]) == ("Allow", "sqs:SendMessage"), name
        dlq = target["DeadLetterConfig"]["Arn"]
        assert dlq == {"Fn::GetAtt": ["SchedulesDeadLetterQueue", "Arn"]}, name  # a firing it cannot send
        # the queue the schedule sends to, where it puts what it cannot send, and no other
        assert statement["Resource"] == [target["Arn"], dlq], name
        assert translated["Resources"]["SchedulesDeadLetterQueue"]["Properties"]["SqsManagedSseEnabled"] is True


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def policy_statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every IAM statement of the template: the roles' inline policies and the managed policies."""
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::IAM::Role":
            for policy in resource["Properties"].get("Policies", []):
                for statement in policy["PolicyDocument"]["Statement"]:
                    yield name, statement
        elif resource["Type"] == "AWS::IAM::ManagedPolicy":
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                yield name, statement


def table_statements(role: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A role's statements on the jobs table, by Sid."""
    return {
        statement["Sid"]: statement
        for policy in role["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
        if any(a.startswith("dynamodb:") for a in as_list(statement["Action"]))
    }


def pop_batch_statements(
    statements: dict[str, dict[str, Any]], declaration: Declaration, types: Any, where: str
) -> None:
    """Check and take out what keeping batches adds, if ``types`` (or the types they push) declare
    ``batches``: batch records only (``_batch#*``), and for a chain's next step the status of the
    ``batches`` types that track it (read only)."""
    batched = {n for n, t in declaration.types.items() if t.batches}
    if not any(n in batched or batched & set(declaration.types[n].pushes) for n in types):
        assert "KeepBatches" not in statements and "ReadStepResults" not in statements, where
        return
    keep = statements.pop("KeepBatches")
    assert as_list(keep["Action"]) == [
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
    ], where
    assert leading_keys(keep) == ["_batch#*"], where
    tracked = sorted(f"{n}#status#*" for n in batched if declaration.types[n].track_status)
    if tracked:
        results = statements.pop("ReadStepResults")
        assert as_list(results["Action"]) == ["dynamodb:GetItem"] and leading_keys(results) == tracked, where
    else:
        assert "ReadStepResults" not in statements, where


def leading_keys(statement: dict[str, Any]) -> list[str]:
    condition = statement["Condition"]
    assert condition["Null"] == {"dynamodb:LeadingKeys": "false"}, statement  # no partition key, no access
    assert set(condition) == {"ForAllValues:StringLike", "Null"}, statement
    patterns: list[str] = condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    return patterns


def string_like(pattern: str, value: str) -> bool:
    """IAM's StringLike: ``*`` is any run of characters, ``?`` any one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


def may_touch(patterns: list[str], key: str) -> bool:
    return any(string_like(pattern, key) for pattern in patterns)


def every_key_of(job_type: str) -> dict[Kind, str]:
    """A partition key of each kind of record of a type, with awkward names in them."""
    return {kind: partition_key(job_type, kind, "x#y*z") for kind in Kind}


# -- IAM ------------------------------------------------------------------------------------------


def test_runner_roles_have_no_managed_policy_beyond_writing_their_logs(translated: dict[str, Any]) -> None:
    # SAM attaches AWSLambdaSQSQueueExecutionRole to a function with an SQS event:
    # ReceiveMessage and DeleteMessage on "*", i.e. any queue in the account.
    # The template declares its event source mappings itself to avoid it.
    assert roles(translated)
    for name, role in roles(translated).items():
        assert role["Properties"].get("ManagedPolicyArns", []) == [BASIC_EXECUTION_ROLE], name


def test_no_role_may_pass_roles_or_use_wildcard_actions(translated: dict[str, Any]) -> None:
    for name, role in roles(translated).items():
        for policy in role["Properties"].get("Policies", []):
            for statement in policy["PolicyDocument"]["Statement"]:
                assert statement["Effect"] == "Allow", (name, statement)
                for action in as_list(statement["Action"]):
                    service, _, operation = action.partition(":")
                    assert service not in {"iam", "sts", "kms", "lambda"}, (name, action)
                    assert "*" not in action, (name, action)
                    assert operation, (name, action)
                assert "*" not in as_list(statement["Resource"]), (name, statement)


def test_only_lambda_may_assume_the_runner_roles(translated: dict[str, Any]) -> None:
    for name, role in roles(translated).items():
        [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert statement["Principal"] == {"Service": ["lambda.amazonaws.com"]}, name
        assert as_list(statement["Action"]) == ["sts:AssumeRole"], name


def test_dynamodb_is_limited_to_the_jobs_table_and_the_calls_the_runner_makes(
    deployments: list[tuple[Declaration, Any]],
) -> None:
    table = {"Fn::GetAtt": ["JobsTable", "Arn"]}
    for _, template in deployments:
        checked = 0
        for name, statement in policy_statements(template):
            dynamodb = {a for a in as_list(statement["Action"]) if a.startswith("dynamodb:")}
            if dynamodb:
                assert as_list(statement["Resource"]) == [table], name
                # no Scan, no table management, no batch or transactional calls (BatchWriteItem
                # and TransactWriteItems are authorised per item as PutItem etc., but need
                # these actions, which no policy grants)
                # (a batch's transactions check its item, and its reads get its shards at once: on batch records only)
                batch_only = {"dynamodb:ConditionCheckItem", "dynamodb:BatchGetItem"}
                allowed = RUNNER_TABLE_ACTIONS | (batch_only if leading_keys(statement) == ["_batch#*"] else set())
                assert dynamodb <= allowed, (name, dynamodb)
                assert dynamodb == set(as_list(statement["Action"])), name  # nothing else in the statement
                # ...and only on keys the statement names: none lacks the LeadingKeys condition
                assert leading_keys(statement), (name, statement)
                checked += 1
        assert checked


def test_each_runner_may_use_only_its_own_types_records_and_its_pushed_types_roots(
    deployments: list[tuple[Declaration, Any]],
) -> None:
    for declaration, template in deployments:
        for queue in declaration.queues.values():
            role = template["Resources"][f"{logical_id(queue.name)}RunnerRole"]
            statements = table_statements(role)
            own = statements.pop("UseOwnTypesRecords")
            assert set(as_list(own["Action"])) == RUNNER_TABLE_ACTIONS
            # its own types' records, and the canary's that `jobkit verify` sends through every runner
            served = {t: declaration.types[t] for t in queue.types} | {CANARY_TYPE: canary_type(queue)}
            expected = sorted(p for t, job_type in served.items() for p in runner_records_patterns(t, job_type))
            assert leading_keys(own) == expected, queue.name
            cancellable = sorted(t for t in queue.types if declaration.types[t].cancellable)
            if cancellable:  # its cancellable types' cancellations, read only
                read = statements.pop("ReadOwnCancellations")
                assert as_list(read["Action"]) == ["dynamodb:GetItem"], queue.name
                assert leading_keys(read) == sorted(cancel_records_pattern(t) for t in cancellable), queue.name
            pushed = {t for name in queue.types for t in declaration.types[name].pushes} - set(queue.types)
            if pushed:
                roots = statements.pop("RecordPushedRootJobs")
                assert as_list(roots["Action"]) == ["dynamodb:UpdateItem"], queue.name
                assert leading_keys(roots) == sorted(root_records_pattern(t) for t in pushed), queue.name
            pop_batch_statements(statements, declaration, queue.types, queue.name)
            assert statements == {}, (queue.name, statements)  # no other statement on the table


def s3_statements(statements: Any) -> dict[str, Any]:
    return {s["Sid"]: s for s in statements if any(str(a).startswith("s3:") for a in as_list(s["Action"]))}


def object_arns(statement: dict[str, Any]) -> list[str]:
    """A statement's object ARNs, the bucket's ARN written as ``BUCKET``."""
    arns = []
    for resource in as_list(statement["Resource"]):
        [bucket, path] = resource["Fn::Join"][1]
        assert bucket == {"Fn::GetAtt": ["PayloadBucket", "Arn"]}
        arns.append("BUCKET" + path)
    return arns


def test_each_roles_s3_access_is_scoped_to_its_prefix(deployments: list[tuple[Declaration, Any]]) -> None:
    for declaration, template in deployments:
        resources = template["Resources"]
        # runners: read their own types' params only, list the bucket (404 for a missing object), write params
        for queue in declaration.queues.values():
            role = resources[f"{logical_id(queue.name)}RunnerRole"]
            found = s3_statements(
                s for policy in role["Properties"]["Policies"] for s in policy["PolicyDocument"]["Statement"]
            )
            assert set(found) == {
                "ReadOwnTypesParams",
                "RemoveEndedJobsParams",
                "TellMissingParams",
                "WriteParams",
            }, queue.name
            assert as_list(found["ReadOwnTypesParams"]["Action"]) == ["s3:GetObject"]
            assert object_arns(found["ReadOwnTypesParams"]) == [f"BUCKET/params/{t}/*" for t in sorted(queue.types)]
            # (and remove them when their job has ended)
            assert as_list(found["RemoveEndedJobsParams"]["Action"]) == ["s3:DeleteObject"]
            assert object_arns(found["RemoveEndedJobsParams"]) == [f"BUCKET/params/{t}/*" for t in sorted(queue.types)]
            assert as_list(found["TellMissingParams"]["Action"]) == ["s3:ListBucket"]
            assert found["TellMissingParams"]["Resource"] == {"Fn::GetAtt": ["PayloadBucket", "Arn"]}
            assert as_list(found["WriteParams"]["Action"]) == ["s3:PutObject"]
            assert object_arns(found["WriteParams"]) == ["BUCKET/params/*"]
        # the producer policy and the push endpoint: write params objects, nothing else of S3
        producer = resources["ProducerPolicy"]["Properties"]["PolicyDocument"]["Statement"]
        endpoint = resources.get("PushEndpointRole")
        roles = [producer]
        if endpoint is not None:
            roles.append([s for p in endpoint["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]])
        for statements in roles:
            found = s3_statements(statements)
            assert set(found) == {"WriteParams"}
            assert as_list(found["WriteParams"]["Action"]) == ["s3:PutObject"]
            assert object_arns(found["WriteParams"]) == ["BUCKET/params/*"]
        # an operator reads and writes params objects (dlq show --params, push), and lists the bucket
        operator = s3_statements(resources["OperatorPolicy"]["Properties"]["PolicyDocument"]["Statement"])
        assert set(operator) == {"ReadAndWriteParams", "TellMissingParams"}
        assert as_list(operator["ReadAndWriteParams"]["Action"]) == ["s3:GetObject", "s3:PutObject"]
        assert object_arns(operator["ReadAndWriteParams"]) == ["BUCKET/params/*"]
        # nobody else deletes a params object (the lifecycle rule expires them), and nobody has s3:*
        for name, resource in resources.items():
            text = json.dumps(resource)
            if resource["Type"] != "AWS::S3::BucketPolicy":  # (whose one statement denies)
                assert '"s3:*"' not in text
                assert "s3:DeleteObject" not in text or name.endswith("RunnerRole"), name


def test_the_payload_bucket_is_encrypted_private_tls_only_and_expires_its_objects(
    deployments: list[tuple[Declaration, Any]],
) -> None:
    for _, template in deployments:
        bucket = template["Resources"]["PayloadBucket"]["Properties"]
        [rule] = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
        assert (
            all(bucket["PublicAccessBlockConfiguration"].values())
            and len(bucket["PublicAccessBlockConfiguration"]) == 4
        )
        [expiry] = bucket["LifecycleConfiguration"]["Rules"]
        assert (expiry["Prefix"], expiry["Status"]) == ("params/", "Enabled")
        assert expiry["ExpirationInDays"] * 86400 > MAX_RELEASE_DELAY_S + DLQ_RETENTION_S
        [deny] = template["Resources"]["PayloadBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
        assert (deny["Effect"], deny["Action"], deny["Condition"]) == (
            "Deny",
            "s3:*",
            {"Bool": {"aws:SecureTransport": "false"}},
        )


def test_no_runner_may_touch_another_queues_records(deployments: list[tuple[Declaration, Any]]) -> None:
    for declaration, template in deployments:
        for queue in declaration.queues.values():
            statements = table_statements(template["Resources"][f"{logical_id(queue.name)}RunnerRole"])
            own = leading_keys(statements["UseOwnTypesRecords"])
            pushed = leading_keys(statements["RecordPushedRootJobs"]) if "RecordPushedRootJobs" in statements else []
            read = leading_keys(statements["ReadOwnCancellations"]) if "ReadOwnCancellations" in statements else []
            pushes = {t for name in queue.types for t in declaration.types[name].pushes}
            for job_type in declaration.types:
                for kind, key in every_key_of(job_type).items():
                    # reads of cancellations: its own cancellable types' only
                    cancellable = job_type in queue.types and declaration.types[job_type].cancellable
                    assert may_touch(read, key) == (kind is Kind.CANCEL and cancellable), (queue.name, key)
                    if job_type in queue.types:
                        # its own types: exactly the kinds of record the runner uses for each
                        used = kind in kinds_used(declaration.types[job_type])
                        assert may_touch(own, key) == used, (queue.name, key)
                        continue
                    # another queue's type: never in the own-records pattern, and only
                    # its root records, only if this runner's jobs push it
                    assert not may_touch(own, key), (queue.name, key)
                    assert may_touch(pushed, key) == (kind is Kind.ROOT and job_type in pushes), (queue.name, key)


def test_the_producer_policy_lets_apps_push_record_roots_and_cancel_only(
    deployments: list[tuple[Declaration, Any]],
) -> None:
    for declaration, template in deployments:
        policies = {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::IAM::ManagedPolicy"}
        assert set(policies) == {"ProducerPolicy", "OperatorPolicy"}
        policy = policies["ProducerPolicy"]
        assert policy["Properties"]["ManagedPolicyName"] == {"Fn::Sub": "${Prefix}-producer"}
        assert template["Outputs"]["ProducerPolicyArn"]["Value"] == {"Ref": "ProducerPolicy"}
        statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
        pop_batch_statements(statements, declaration, declaration.types, "ProducerPolicy")
        endpoint = declaration.push_endpoint is not None and declaration.push_endpoint.auth == "iam"
        cancellable = {t for t, declared in declaration.types.items() if declared.cancellable}
        tracked = {t for t, declared in declaration.types.items() if declared.track_status}
        assert set(statements) == {"SendToJobQueues", "RecordRootJobs", "WriteParams"} | (
            {"InvokePushEndpoint"} if endpoint else set()
        ) | ({"CancelJobs"} if cancellable else set()) | ({"ReadJobStatus"} if cancellable | tracked else set())
        if endpoint:  # the push endpoint's function, and nothing else of Lambda
            invoke = statements["InvokePushEndpoint"]
            assert invoke["Action"] == ["lambda:InvokeFunctionUrl", "lambda:InvokeFunction"]
            assert invoke["Resource"] == {"Fn::GetAtt": ["PushEndpoint", "Arn"]}
        # every job queue, and no DLQ
        send = statements["SendToJobQueues"]
        assert sorted(as_list(send["Action"])) == ["sqs:GetQueueUrl", "sqs:SendMessage"]
        assert as_list(send["Resource"]) == [
            {"Fn::GetAtt": [f"{logical_id(lane)}Queue", "Arn"]} for lane in declaration.lanes
        ]
        # on the table, only UpdateItem, only on root records
        roots = statements["RecordRootJobs"]
        assert as_list(roots["Action"]) == ["dynamodb:UpdateItem"]
        assert roots["Resource"] == {"Fn::GetAtt": ["JobsTable", "Arn"]}
        assert leading_keys(roots) == sorted(root_records_pattern(t) for t in declaration.types)
        for job_type in declaration.types:
            for kind, key in every_key_of(job_type).items():
                assert may_touch(leading_keys(roots), key) == (kind is Kind.ROOT), key
        # cancel: write a cancellable type's cancellations, and nothing else
        cancel = statements.get("CancelJobs", {"Action": [], "Condition": {}})
        read = statements.get("ReadJobStatus", {"Action": [], "Condition": {}})
        if cancellable:
            assert as_list(cancel["Action"]) == ["dynamodb:PutItem", "dynamodb:UpdateItem"]
        if cancellable | tracked:
            assert as_list(read["Action"]) == ["dynamodb:GetItem"]
        for job_type, declared in declaration.types.items():
            for kind, key in every_key_of(job_type).items():
                writes = bool(cancel["Condition"]) and may_touch(leading_keys(cancel), key)
                assert writes == (kind is Kind.CANCEL and job_type in cancellable), key
                # read: whether a job ended (status, delivery claims) and its cancellations
                readable = (
                    (kind is Kind.CANCEL and job_type in cancellable)
                    or (kind is Kind.STATUS and job_type in tracked)
                    or (kind is Kind.DELIVERY and job_type in cancellable and declared.deliver_once)
                )
                assert (bool(read["Condition"]) and may_touch(leading_keys(read), key)) == readable, key


def test_every_event_source_mapping_reads_its_own_runners_queue(
    translated: dict[str, Any], example_declaration: Declaration
) -> None:
    mappings = [
        r["Properties"] for r in translated["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    # one per queue and priority lane, each with its lane's concurrency
    assert len(mappings) == len(example_declaration.lanes) > len(example_declaration.queues)
    for mapping in mappings:
        runner = mapping["FunctionName"]["Ref"]
        [queue] = [q for q in example_declaration.queues.values() if f"{logical_id(q.name)}Runner" == runner]
        [lane] = [
            lane
            for lane in queue.lanes
            if mapping["EventSourceArn"] == {"Fn::GetAtt": [f"{logical_id(lane.key)}Queue", "Arn"]}
        ]
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": lane.max_concurrency}


# -- checkov ----------------------------------------------------------------------------------------


def test_every_checkov_exception_is_justified_where_it_applies(example_declaration: Declaration) -> None:
    # `checkov -f template.yaml --framework cloudformation` reports these as skipped;
    # each skip carries its reason, and applies only to the kind of resource it is about.
    applies_to = {
        "CKV_AWS_27": "AWS::SQS::Queue",
        "CKV_AWS_119": "AWS::DynamoDB::Table",
        "CKV_AWS_116": "AWS::Serverless::Function",
        "CKV_AWS_117": "AWS::Serverless::Function",
        "CKV_AWS_115": "AWS::Serverless::Function",
        "CKV_AWS_173": "AWS::Serverless::Function",
        "CKV_AWS_26": "AWS::SNS::Topic",
        "CKV_AWS_158": "AWS::Logs::LogGroup",
        "CKV_AWS_18": "AWS::S3::Bucket",
        "CKV_AWS_21": "AWS::S3::Bucket",
    }
    assert set(CHECKOV_SKIPS) == set(applies_to)
    skipped = set()
    for name, resource in build(example_declaration)["Resources"].items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            assert applies_to[skip["id"]] == resource["Type"], (name, skip["id"])
            assert len(skip["comment"]) > 40, (name, skip)
            skipped.add(skip["id"])
    assert skipped == set(applies_to)


def test_the_alarm_topic_is_one_alarms_can_publish_to_and_says_why(translated: dict[str, Any]) -> None:
    # CloudWatch alarms cannot publish to a topic encrypted with the AWS managed key
    # alias/aws/sns: their notifications would be dropped, silently.
    topic = translated["Resources"]["AlarmTopic"]
    assert "KmsMasterKeyId" not in topic["Properties"]
    [skip] = topic["Metadata"]["checkov"]["skip"]
    assert skip == {"id": "CKV_AWS_26", "comment": CHECKOV_SKIPS["CKV_AWS_26"]}
    for reason in ("alarm state changes", "no job data", "cannot publish", "alias/aws/sns"):
        assert reason in skip["comment"]
    alarms = [r for r in translated["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms and all(
        alarm["Properties"]["AlarmActions"]
        == {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
        for alarm in alarms
    )


# -- class resolution --------------------------------------------------------------------------------


@pytest.fixture
def canary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable module that records being imported."""
    (tmp_path / "jobkitcanary.py").write_text("import builtins\nbuiltins.jobkit_canary_imported = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "jobkitcanary"
    sys.modules.pop("jobkitcanary", None)
    import builtins

    if hasattr(builtins, "jobkit_canary_imported"):
        delattr(builtins, "jobkit_canary_imported")


def body(job_type: Any, **extra: Any) -> str:
    return json.dumps({"v": 1, "id": "hostile-1", "type": job_type, "params": {}, "enqueuedAt": START, **extra})


def test_message_content_never_chooses_what_is_imported(
    stack: LocalStack, canary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given messages whose type names an importable module, a module path, or the
    # class path of a declared type, and one that names a class in an extra field
    hostile = [
        body(canary),
        body("os"),
        body("subprocess"),
        body("testjobs"),
        body("os:system"),
        body("os.path"),
        body("testjobs:NoopJob"),
        body("jobtypes.refresh_links:RefreshLinksJob"),
        body("__import__"),
        body({"module": canary}),
    ]
    # A field the wire format does not know is ignored (a newer producer's optional
    # one): a body naming a class in one runs the declared class, and imports nothing else
    ignored = body("noop", **{"class": f"{canary}:Job"})
    loaded: list[str] = []
    real_load = JobRegistry._load
    monkeypatch.setattr(JobRegistry, "_load", staticmethod(lambda path: loaded.append(path) or real_load(path)))
    url = stack.queue_urls["test-noop"]
    for text in [*hostile, ignored]:
        stack.sqs.send_message(QueueUrl=url, MessageBody=text)
    stack.queue_group().push(JobSpecification("noop"))
    # When the runner gets them
    stack.drain()
    # Then each hostile one is dead-lettered as poison, the one with an extra field runs
    # as the declared type, and the only module imported is the declared one
    outcomes = [r.outcome for r in stack.results.results]
    assert outcomes.count(Outcome.POISONED) == len(hostile) and outcomes.count(Outcome.SUCCEEDED) == 2
    assert loaded == ["testjobs:NoopJob"]  # noop's declared class
    import builtins

    assert not hasattr(builtins, "jobkit_canary_imported") and canary not in sys.modules
    reasons = [m["MessageAttributes"]["jobkit.errorClass"]["StringValue"] for m in stack.dead_letters("noop")]
    assert sorted(set(reasons)) == ["SpecError", "UnknownJobType"]


def test_a_declared_type_runs_only_its_declared_class(stack: LocalStack, canary: str) -> None:
    # A poison message's JobType attribute is the sender's word: it may not become a
    # metric dimension or log key unless it names a declared type.
    url = stack.queue_urls["test-noop"]
    stack.sqs.send_message(
        QueueUrl=url,
        MessageBody=body(canary),
        MessageAttributes={"JobType": {"DataType": "String", "StringValue": "x" * 5000}},
    )
    stack.drain()
    [result] = stack.results.results
    assert (result.outcome, result.job_type) == (Outcome.POISONED, "unknown")


# -- params stay out of logs and reasons ----------------------------------------------------------------


def test_params_never_reach_logs_or_dead_letter_reasons_above_debug(
    stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    group = stack.queue_group("enwiki")
    group.push(
        [
            JobSpecification("noop", {"token": SECRET}),
            JobSpecification("alwaysFails", {"token": SECRET}),
            JobSpecification("permanent", {"token": SECRET}),
            JobSpecification("dedup", {"token": SECRET}),
            JobSpecification("dedup", {"token": SECRET}),
        ]
    )
    url = stack.queue_urls["test-noop"]
    # a poison message whose params field has the wrong type: its content is still params
    stack.sqs.send_message(QueueUrl=url, MessageBody=body("noop").replace('"params": {}', f'"params": "{SECRET}"'))
    with caplog.at_level(logging.INFO, logger="jobkit"):
        stack.clock.advance(1)
        stack.drain()
    above_debug = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert any(r.levelno >= logging.ERROR for r in above_debug)
    for record in above_debug:
        assert SECRET not in record.getMessage() and SECRET not in json.dumps(vars(record), default=str)
    for queue in ("noop", "alwaysFails", "permanent"):
        for dead in stack.dead_letters(queue):
            reasons = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items() if k.startswith("jobkit.")}
            assert reasons and SECRET not in json.dumps(reasons)


def test_a_hand_made_event_cannot_crash_the_runner(stack: LocalStack) -> None:
    # Direct invocation with a crafted event (lambda:InvokeFunction, not SQS): odd
    # records end as poison or retries, never as an exception out of the handler.
    good = JobSpecification("noop").stamped(START)
    messages = [
        {"MessageId": "m1", "ReceiptHandle": "r1", "Body": good.to_message(), "Attributes": {}},
        {"MessageId": "m2", "ReceiptHandle": "r2", "Body": "\x00\x01", "Attributes": {}},
        {"MessageId": "m3", "ReceiptHandle": "r3", "Body": "{}", "Attributes": {"ApproximateReceiveCount": "1"}},
    ]
    event = sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:test-noop")
    event["Records"].append({"messageId": "m4"})  # no body, no receipt handle
    response = stack.runners["noop"].handle(event, None)
    assert {f["itemIdentifier"] for f in response["batchItemFailures"]} <= {"m2", "m3", "m4"}
    assert "m1" not in {f["itemIdentifier"] for f in response["batchItemFailures"]}


@pytest.fixture
def template_stack(example_declaration: Declaration) -> Iterator[LocalStack]:
    with LocalStack(example_declaration, clock=VirtualClock(START), template=TEMPLATE) as local:
        yield local


def test_the_template_stack_still_runs_jobs_without_sams_event_policy(template_stack: LocalStack) -> None:
    # The event source mappings the template now declares itself are created, and wired
    group = template_stack.queue_group("enwiki")
    group.push(JobSpecification("refreshLinks", {"title": "A"}))
    template_stack.drain()
    assert template_stack.results.outcomes() == {Outcome.SUCCEEDED: 1}
    lambda_ = template_stack.client("lambda")
    mappings = lambda_.list_event_source_mappings()["EventSourceMappings"]
    assert {m["EventSourceArn"].rsplit(":", 1)[-1] for m in mappings} == {
        f"jobkit-{lane}"
        for lane in template_stack.declaration.lanes  # each queue's, and each priority lane's
    }
    assert "refreshLinks-high" in template_stack.declaration.lanes
    group.push(JobSpecification("refreshLinks", {"title": "B"}, priority="high"))
    template_stack.drain()
    assert [r.priority for r in template_stack.results.results] == [None, "high"]


def load_runner_app(monkeypatch: pytest.MonkeyPatch) -> Any:
    import importlib.util

    runner_dir = ROOT / "functions" / "runner"
    monkeypatch.syspath_prepend(str(runner_dir))  # Lambda's task root
    logging.Logger.manager.loggerDict.pop("jobkit-runner", None)  # a fresh container's logging
    import jobkit.handler

    # A fresh copy of the handler module: a new container, with no runner built yet.
    spec = importlib.util.spec_from_file_location("runner_app_security", jobkit.handler.__file__)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def deployed_logging() -> Iterator[None]:
    # The handler configures the "jobkit" logger as on Lambda (JSON to stdout); undo it after.
    package_logger = logging.getLogger("jobkit")
    saved = (list(package_logger.handlers), package_logger.level, package_logger.propagate)
    yield
    package_logger.handlers, package_logger.level, package_logger.propagate = saved
    logging.Logger.manager.loggerDict.pop("jobkit-runner", None)


def test_the_deployed_handlers_json_logs_carry_no_params_on_any_path(
    example_declaration: Declaration,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    deployed_logging: None,
) -> None:
    from jobkit.declaration.config import declaration_to_dict
    from jobkit.local import FakeLambdaContext

    # The handler runs on the real clock, as on Lambda: push at the real time too.
    with LocalStack(example_declaration, clock=VirtualClock()) as local:
        monkeypatch.setenv("JOBKIT_DECLARATION", json.dumps(declaration_to_dict(example_declaration)))
        monkeypatch.setenv("JOBKIT_QUEUE_URLS", json.dumps(local.queue_urls))
        monkeypatch.setenv("JOBKIT_QUEUE", "refreshLinks")
        url = local.queue_urls["jobkit-refreshLinks"]
        group = local.queue_group("enwiki")
        group.push(JobSpecification("refreshLinks", {"title": "Main Page", "token": SECRET}))  # succeeds
        group.push(JobSpecification("refreshLinks", {"title": "Module:Broken", "token": SECRET}))  # fails, retried
        bad_params = json.dumps({"v": 1, "id": "p-1", "type": "refreshLinks", "params": SECRET, "enqueuedAt": START})
        local.sqs.send_message(QueueUrl=url, MessageBody=bad_params)  # poison, with params as text
        messages = local.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]
        )["Messages"]
        assert len(messages) == 3
        app = load_runner_app(monkeypatch)
        capsys.readouterr()
        app.handler(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:jobkit-refreshLinks"), FakeLambdaContext())
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    logs = [line for line in lines if "message" in line]
    assert {log["level"] for log in logs} >= {"INFO", "WARNING", "ERROR"}  # success, retry, poison
    assert all(SECRET not in json.dumps(line) for line in lines)
