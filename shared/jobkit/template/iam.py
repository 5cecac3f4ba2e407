"""Least-privilege IAM: the runner's policy, and the managed policy an app that
pushes attaches.

A runner may consume only its own queue, send only to its own queue (delay hops
and deferrals), the queues of the types its jobs push, and its own DLQ, and use
only its own types' records in the jobs table, plus the root records of the types
its jobs push (``dynamodb:LeadingKeys``). Of each of its types, it gets only
the kinds of record it uses: roots, duplicate claims, attempts and deferrals
always; delivery claims, status, leases, rate buckets and debounce windows only
when the type declares the option that writes them
(:func:`jobkit.records.keys.kinds_used`). It reads, and never writes, its
``cancellable`` types' cancellations: only apps (the producer policy) and
operators cancel. A runner of a ``batches`` type counts members and pushes
callbacks in any batch (a batch spans types: its records are keyed by batch),
and reads the result of a ``batches`` type's job that was a chain's step, for
the step after it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jobkit.core.resources import CANARY_TYPE
from jobkit.declaration.config import Declaration, QueueConfig
from jobkit.jobs.canary import canary_type
from jobkit.records.keys import (
    BATCH_RECORDS_PATTERN,
    Kind,
    cancel_records_pattern,
    kind_pattern,
    leading_key_patterns,
    own_records_pattern,
    root_records_pattern,
)
from jobkit.template.naming import NAMES, PUSH_ENDPOINT, QueueIds
from jobkit.template.payload_bucket import operator_payload_statements, payload_statements
from jobkit.template.policy_size import MAX_MANAGED_POLICY_CHARS, check_policy, policy_chars

#: What the runner does with the table: claims, failure and status records, reads of them.
RUNNER_TABLE_ACTIONS = [f"dynamodb:{action}" for action in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query")]
#: Reading records, and writing cancellations (a job's is a put, a mark or watermark an update).
READ_ACTIONS, CANCEL_ACTIONS = ["dynamodb:GetItem", "dynamodb:Query"], ["dynamodb:PutItem", "dynamodb:UpdateItem"]
#: What reading one job's cancellation, status or delivery claim takes: an item each, never a query.
GET_ITEM = ["dynamodb:GetItem"]
#: What keeping a batch takes: conditional updates (alone and in transactions) and reads of its items at once.
BATCH_ACTIONS = ["dynamodb:UpdateItem", "dynamodb:ConditionCheckItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"]


def batch_statements(declaration: Declaration, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Keeping batches, if a type (of ``names``, or any) declares ``batches``, or
    pushes a type that does (a job may open a batch, and push into it)."""
    types = declaration.types if names is None else names
    batched = {n for n, t in declaration.types.items() if t.batches}
    if not any(n in batched or batched & set(declaration.types[n].pushes) for n in types):
        return []
    statements = [table_statement("KeepBatches", BATCH_ACTIONS, [BATCH_RECORDS_PATTERN])]
    # a chain's next step gets its step's one job's result: a batches type's status record
    results = [kind_pattern(n, Kind.STATUS) for n in sorted(batched) if declaration.types[n].track_status]
    if results:
        statements.append(table_statement("ReadStepResults", GET_ITEM, results))
    return statements


def cancellable_types(declaration: Declaration, names: Iterable[str] | None = None) -> list[str]:
    """The types (of ``names``, or all) that declare ``cancellable``."""
    return [n for n in (declaration.types if names is None else names) if declaration.types[n].cancellable]


def control_statements(declaration: Declaration) -> list[dict[str, Any]]:
    """What ``group.cancel``, ``cancel_all``, ``status`` and ``wait`` need: write the
    cancellable types' cancellations; read them, the status of ``track_status``
    types and the delivery claims of ``deliver_once`` types (whether a job ended)."""
    types = declaration.types
    cancellable = cancellable_types(declaration)
    readable = [cancel_records_pattern(n) for n in cancellable]
    readable += [kind_pattern(n, Kind.STATUS) for n, t in types.items() if t.track_status]
    readable += [kind_pattern(n, Kind.DELIVERY) for n in cancellable if types[n].deliver_once]
    statements = []
    if cancellable:
        statements.append(table_statement("CancelJobs", CANCEL_ACTIONS, map(cancel_records_pattern, cancellable)))
    if readable:
        statements.append(table_statement("ReadJobStatus", GET_ITEM, readable))
    return statements


def pushed_types(declaration: Declaration, queue: QueueConfig) -> set[str]:
    """The types that the jobs of ``queue``'s types push."""
    return {target for name in queue.types for target in declaration.types[name].pushes}


def sendable_queues(declaration: Declaration, queue: QueueConfig) -> list[str]:
    """The declared queues the runner of ``queue`` sends to: its own, and those of the types its jobs push."""
    return sorted({declaration.types[t].queue for t in pushed_types(declaration, queue)} | {queue.name})


def lane_arns(queue: QueueConfig, *, dlq: bool = False) -> list[dict[str, Any]]:
    """The ARNs of a queue's lanes (its own queue first), or of their DLQs."""
    ids = [QueueIds(lane.key) for lane in queue.lanes]
    return [{"Fn::GetAtt": [i.dlq if dlq else i.queue, "Arn"]} for i in ids]


def producer_policy(declaration: Declaration) -> dict[str, Any]:
    """What an app that pushes needs: send to every job queue (not the DLQs), look
    their URLs up, record the root jobs it pushes, and call the push endpoint
    (with IAM auth), if there is one. An app's role attaches it.

    The queues are named one by one, while that fits in a managed policy
    (IAM's 6,144 characters: about 55 queues and lanes); past that, by the
    stack's prefix (:func:`prefix_send_statements`)."""
    others = [
        table_statement("RecordRootJobs", ["dynamodb:UpdateItem"], map(root_records_pattern, declaration.types)),
        *control_statements(declaration),
        *batch_statements(declaration),
        *producer_statement(declaration),
        *payload_statements(write=True),
    ]
    queues = [arn for queue in declaration.queues.values() for arn in lane_arns(queue)]
    send = {"Sid": "SendToJobQueues", "Effect": "Allow", "Action": SEND_ACTIONS, "Resource": queues}
    document = {"Version": "2012-10-17", "Statement": [send, *others]}
    if policy_chars(declaration, document) > MAX_MANAGED_POLICY_CHARS:
        document["Statement"] = [*prefix_send_statements(), *others]
        check_policy(
            declaration,
            "types",
            "the producer policy",
            document,
            MAX_MANAGED_POLICY_CHARS,
            "it names each type's root records (and its cancellations and status, if declared): split the types"
            " over two stacks (prefixes)",
        )
    return {
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {
            "ManagedPolicyName": {"Fn::Sub": NAMES.producer_policy},
            "Description": "jobkit: push jobs of every declared type (attach to an app's role)",
            "PolicyDocument": document,
        },
    }


#: What pushing to a queue takes: sending, and looking its URL up.
SEND_ACTIONS = ["sqs:SendMessage", "sqs:GetQueueUrl"]
_STACK_QUEUES = "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${Prefix}-*"


def prefix_send_statements() -> list[dict[str, Any]]:
    """Sending to every queue of the stack, by its prefix: for a stack whose
    queues are too many to name one by one. Its DLQs match too. That gives a
    producer nothing it could not do by pushing (the DLQ tools verify every
    reason a dead letter claims), and a deny of them would also deny the
    runners of a stack whose prefix begins with this one, if they attach it."""
    every = {"Fn::Sub": _STACK_QUEUES}
    return [{"Sid": "SendToJobQueues", "Effect": "Allow", "Action": SEND_ACTIONS, "Resource": every}]


def operator_policy(declaration: Declaration) -> dict[str, Any]:
    """What an operator's role needs for ``jobkit verify`` and the ops commands:
    read and clean the stack's queues and DLQs (by its prefix), read the jobs
    table's records and delete the canaries', read and write params in the
    payload bucket, read the runners' recursion setting and event source
    mappings, and read alarms and metrics."""
    queues = "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${Prefix}-*"
    runners = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${Prefix}-runner-*"
    return {
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {
            "ManagedPolicyName": {"Fn::Sub": NAMES.operator_policy},
            "Description": "jobkit: verify the stack and operate its queues (attach to an operator's role)",
            "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "OperateQueues",
                        "Effect": "Allow",
                        "Action": [
                            "sqs:SendMessage",
                            "sqs:ReceiveMessage",
                            "sqs:DeleteMessage",
                            "sqs:ChangeMessageVisibility",
                            "sqs:GetQueueAttributes",
                            "sqs:GetQueueUrl",
                            "sqs:PurgeQueue",
                            "sqs:StartMessageMoveTask",
                            "sqs:ListMessageMoveTasks",
                        ],
                        "Resource": {"Fn::Sub": queues},
                    },
                    table_statement(
                        "ReadRecords", READ_ACTIONS, [own_records_pattern(n) for n in [*declaration.types, CANARY_TYPE]]
                    ),
                    *[
                        table_statement("CancelJobs", CANCEL_ACTIONS, map(cancel_records_pattern, cancellable))
                        for cancellable in [cancellable_types(declaration)]
                        if cancellable
                    ],
                    table_statement("CleanCanaryRecords", ["dynamodb:DeleteItem"], [f"{CANARY_TYPE}#*"]),
                    *[
                        table_statement(
                            "ReadBatches", [*READ_ACTIONS, "dynamodb:BatchGetItem"], [BATCH_RECORDS_PATTERN]
                        )
                        for _ in batch_statements(declaration)
                    ],
                    # a large dead letter's params (`jobkit dlq show --params`), and `jobkit push` of a large job
                    *operator_payload_statements(),
                    {
                        "Sid": "ReadRunners",
                        "Effect": "Allow",
                        "Action": ["lambda:GetFunction", "lambda:GetFunctionRecursionConfig"],
                        "Resource": {"Fn::Sub": runners},
                    },
                    {
                        # no resource-level permissions for these reads
                        "Sid": "ReadMappingsAlarmsAndMetrics",
                        "Effect": "Allow",
                        "Action": [
                            "lambda:ListEventSourceMappings",
                            "cloudwatch:DescribeAlarms",
                            "cloudwatch:GetMetricData",
                            "cloudwatch:GetMetricStatistics",
                            "cloudwatch:GetInsightRuleReport",
                            "logs:FilterLogEvents",
                        ],
                        "Resource": "*",
                    },
                ],
            },
        },
    }


def producer_statement(declaration: Declaration) -> list[dict[str, Any]]:
    """What the producer policy adds for an IAM endpoint: invoking it through its URL
    (AWS asks for both actions on function URLs created since October 2025)."""
    options = declaration.push_endpoint
    if options is None or options.auth != "iam":
        return []
    return [
        {
            "Sid": "InvokePushEndpoint",
            "Effect": "Allow",
            "Action": ["lambda:InvokeFunctionUrl", "lambda:InvokeFunction"],
            "Resource": {"Fn::GetAtt": [PUSH_ENDPOINT, "Arn"]},
        }
    ]


def runner_policy(declaration: Declaration, queue: QueueConfig) -> dict[str, Any]:
    """The runner function's policy (an entry of its SAM ``Policies``)."""
    # every lane of the queues it sends to: a job pushed from a job may take its lane
    queue_arns = [arn for name in sendable_queues(declaration, queue) for arn in lane_arns(declaration.queues[name])]
    # Of its own types, the kinds of record it uses; of the other types its jobs
    # push, only the root records (pushing a root job records its root timestamp).
    # (and of `jobkit verify`'s canary, which every runner serves: its status and claims)
    served = {name: declaration.types[name] for name in queue.types} | {CANARY_TYPE: canary_type(queue)}
    own, pushed = leading_key_patterns(served, pushed_types(declaration, queue))
    table_statements = [table_statement("UseOwnTypesRecords", RUNNER_TABLE_ACTIONS, own)]
    cancellable = cancellable_types(declaration, queue.types)
    if cancellable:  # read only: a runner never cancels, nor lifts a cancellation
        table_statements.append(
            table_statement("ReadOwnCancellations", GET_ITEM, map(cancel_records_pattern, cancellable))
        )
    if pushed:
        table_statements.append(table_statement("RecordPushedRootJobs", ["dynamodb:UpdateItem"], pushed))
    table_statements += batch_statements(declaration, queue.types)
    return {
        "Statement": [
            {
                "Sid": "ConsumeOwnQueue",
                "Effect": "Allow",
                "Action": [
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:ChangeMessageVisibility",
                    "sqs:GetQueueAttributes",
                ],
                "Resource": lane_arns(queue),
            },
            {
                # Its own queue (delay hops, deferrals), the queues of the
                # types its jobs push, and its own DLQ; each with its lanes.
                "Sid": "SendToDeclaredQueues",
                "Effect": "Allow",
                "Action": ["sqs:SendMessage"],
                "Resource": [*queue_arns, *lane_arns(queue, dlq=True)],
            },
            *table_statements,
            *payload_statements(read=queue.types, write=True, end=True),
            *([XRAY_STATEMENT] if traced(declaration, queue) else []),
        ]
    }


#: What a runner with ``Tracing: Active`` needs to send its spans (only those have it).
XRAY_STATEMENT: dict[str, Any] = {
    "Sid": "SendTraces",
    "Effect": "Allow",
    "Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
    "Resource": "*",  # X-Ray has no resource-level permissions for these
}


def traced(declaration: Declaration, queue: QueueConfig) -> bool:
    """Whether the queue has a type with ``tracing = true`` (its runner traces)."""
    return any(declaration.types[name].tracing for name in queue.types)


def table_statement(sid: str, actions: list[str], leading_keys: Iterable[str]) -> dict[str, Any]:
    """Actions on the jobs table, only on records whose partition key matches one of
    ``leading_keys``. ``ForAllValues`` holds for a request without a partition key
    (a Scan, say), so the ``Null`` condition requires one."""
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": list(actions),
        "Resource": {"Fn::GetAtt": ["JobsTable", "Arn"]},
        "Condition": {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": sorted(leading_keys)},
            "Null": {"dynamodb:LeadingKeys": "false"},
        },
    }
