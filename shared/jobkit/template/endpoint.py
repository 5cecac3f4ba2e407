"""The HTTP push endpoint's resources, when the declaration has ``[push_endpoint]``.

One function with a function URL (``PushEndpoint``, its URL in the
``PushEndpointUrl`` output). It has no code of its own: an inline line imports
the handler from the jobkit layer. It may only send to the queues of the types
it takes and write their root records (``dynamodb:LeadingKeys``), cancel and
read the status of jobs of those types as ``group.cancel`` and ``group.status``
do (the producer policy's :func:`~jobkit.template.iam.control_statements`, for
its types only), and with ``auth = "hmac"`` read its one secret. With
``auth = "iam"`` the URL takes only requests signed by principals whose policy
allows invoking it: the producer policy does.
"""

from __future__ import annotations

import json
from typing import Any

from jobkit.core.resources import ARCHITECTURE, PREFIX_PARAMETER, RUNTIME
from jobkit.declaration.config import Declaration, declaration_to_dict
from jobkit.records.keys import root_records_pattern
from jobkit.template.checkov import checkov_skips
from jobkit.template.iam import batch_statements, control_statements, lane_arns, table_statement
from jobkit.template.naming import NAMES, PUSH_ENDPOINT, QueueIds
from jobkit.template.payload_bucket import PAYLOAD_VARIABLE, payload_statements
from jobkit.template.policy_size import MAX_ROLE_POLICY_CHARS, check_policy
from jobkit.template.resources import check_environment_size

FUNCTION = PUSH_ENDPOINT
LOG_GROUP = "PushEndpointLogGroup"
INLINE_CODE = "from jobkit.endpoint.lambda_handler import handler  # the jobkit layer's HTTP push endpoint\n"


def endpoint_resources(declaration: Declaration) -> dict[str, Any]:
    """The function, its log group; nothing without ``[push_endpoint]``."""
    options = declaration.push_endpoint
    if options is None:
        return {}
    own = declaration.for_endpoint()
    subset = declaration_to_dict(own, only_types=set(own.types), defaults=False)
    subset["jobkit"].pop("prefix")
    declaration_json = json.dumps(subset, separators=(",", ":"), sort_keys=True)
    urls = {NAMES.queue(name): f"${{{QueueIds(name).queue}}}" for name in own.queues}  # lanes: spelled from these
    urls_json = json.dumps(urls, separators=(",", ":"), sort_keys=True)
    variables: dict[str, Any] = {
        "JOBKIT_DECLARATION": declaration_json,
        "JOBKIT_PREFIX": {"Ref": PREFIX_PARAMETER},
        "JOBKIT_QUEUE_URLS": {"Fn::Sub": urls_json},
        **PAYLOAD_VARIABLE,
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    statements: list[dict[str, Any]] = [
        {
            "Sid": "SendToTakenTypesQueues",
            "Effect": "Allow",
            "Action": ["sqs:SendMessage"],
            "Resource": [arn for queue in own.queues.values() for arn in lane_arns(queue)],
        },
        table_statement("RecordRootJobs", ["dynamodb:UpdateItem"], map(root_records_pattern, own.types)),
        # its cancellable types' cancellations; what cancel and status read of its types
        *control_statements(own),
        # its batches: opened, sealed and read, their members counted in (if a type it takes declares batches)
        *batch_statements(own),
        # the params of a job too large for a message
        *payload_statements(write=True),
    ]
    if options.hmac_secret is not None:
        variables["JOBKIT_ENDPOINT_HMAC_SECRET"] = options.hmac_secret
        statements.append(
            {
                "Sid": "ReadProducerKey",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue"],
                "Resource": _secret_arn(options.hmac_secret),
            }
        )
    check_environment_size(
        declaration,
        "push_endpoint.types",
        "the push endpoint",
        "take fewer types, or shorten their params_schema",
        variables,
    )
    check_policy(
        declaration,
        "push_endpoint.types",
        "the push endpoint's policy",
        {"Statement": statements},
        MAX_ROLE_POLICY_CHARS,
        "it takes types of too many queues and priority lanes: take fewer types (another stack may take the rest)",
    )
    return {
        FUNCTION: {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "FunctionName": {"Fn::Sub": NAMES.push_endpoint},
                "Description": f"jobkit push endpoint: {', '.join(own.types)}",
                "InlineCode": INLINE_CODE,
                "Handler": "index.handler",
                "Runtime": RUNTIME,
                "Architectures": [ARCHITECTURE],
                "Timeout": 30,
                "MemorySize": 256,
                "Layers": [{"Ref": "JobkitLayer"}],
                "LoggingConfig": {"LogGroup": {"Ref": LOG_GROUP}},
                "Environment": {"Variables": variables},
                "FunctionUrlConfig": {"AuthType": "AWS_IAM" if options.auth == "iam" else "NONE"},
                "Policies": [{"Statement": statements}],
            },
            "Metadata": checkov_skips("CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173"),
        },
        LOG_GROUP: {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {
                "LogGroupName": {"Fn::Sub": f"/aws/lambda/{NAMES.push_endpoint}"},
                "RetentionInDays": {"Ref": "LogRetentionDays"},
            },
            "Metadata": checkov_skips("CKV_AWS_158"),
        },
    }


def endpoint_outputs(declaration: Declaration) -> dict[str, Any]:
    if declaration.push_endpoint is None:
        return {}
    return {
        "PushEndpointUrl": {
            "Description": 'The HTTP push endpoint (POST {"jobs": [...]})',
            "Value": {"Fn::GetAtt": [f"{FUNCTION}Url", "FunctionUrl"]},
        }
    }


def _secret_arn(secret: str) -> Any:
    if secret.startswith("arn:"):
        return secret
    # A name: Secrets Manager adds six random characters to the ARN.
    arn = "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:"
    return {"Fn::Sub": f"{arn}{secret}-??????"}
