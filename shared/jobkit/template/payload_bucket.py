"""The payload bucket: where the params of jobs too large for a message go
(:mod:`jobkit.payloads`). Encrypted at rest, closed to the public, TLS only,
versioning off (an object is written once, under a key that holds its hash),
and every object expired once no message is likely to name it any more
(:data:`PAYLOAD_EXPIRY_DAYS`); a runner removes the object of a job that ended
(:mod:`jobkit.runner.stages.payload_done`). The
local stack creates it from these properties too (:mod:`jobkit.local.provision`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from jobkit.core.resources import DLQ_RETENTION_S, QUEUE_RETENTION_S
from jobkit.core.spec import MAX_RELEASE_DELAY_S
from jobkit.payloads.reference import KEY_PREFIX, type_prefix
from jobkit.template.checkov import checkov_skips

#: Days a params object is kept: the longest a job may wait for its release
#: time, a queue's retention (its retries and holds), a DLQ's retention, and a
#: redrive's second life in both; and a week. A job redriven again after that
#: is dead-lettered at once with ``PayloadMissing`` (docs/large-payloads.md).
PAYLOAD_EXPIRY_DAYS = math.ceil((MAX_RELEASE_DELAY_S + 2 * (QUEUE_RETENTION_S + DLQ_RETENTION_S)) / 86400) + 7
BUCKET_ID = "PayloadBucket"


def local_bucket_name(prefix: str) -> str:
    """The local stack's payload bucket (a deployed stack's is named by CloudFormation)."""
    return re.sub(r"[^a-z0-9-]", "-", prefix.lower())[:50].strip("-") + "-payloads"


def payload_bucket() -> dict[str, Any]:
    """The bucket's resource (its name is CloudFormation's: bucket names are global)."""
    return {
        "Type": "AWS::S3::Bucket",
        "Properties": {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}
                ]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
            "LifecycleConfiguration": {
                "Rules": [
                    {
                        "Id": "ExpireParams",
                        "Status": "Enabled",
                        "Prefix": KEY_PREFIX,
                        "ExpirationInDays": PAYLOAD_EXPIRY_DAYS,
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                    }
                ]
            },
        },
    }


def tls_only_policy(bucket_arn: Any) -> dict[str, Any]:
    """The bucket policy's one statement: any request without TLS is denied."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TlsOnly",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, {"Fn::Sub": ["${Arn}/*", {"Arn": bucket_arn}]}],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def _objects(types: Iterable[str]) -> list[dict[str, Any]]:
    """The ARNs of the params objects of these types: ``{bucket}/params/{type}/*``."""
    arn = {"Fn::GetAtt": [BUCKET_ID, "Arn"]}
    return [{"Fn::Join": ["", [arn, f"/{type_prefix(name)}*"]]} for name in sorted(set(types))]


def _all_objects() -> dict[str, Any]:
    """Every params object (``params/*``, whatever the type). (A new dict each time: the
    template's YAML would write a dict used twice as an anchor and an alias.)"""
    return {"Fn::Join": ["", [{"Fn::GetAtt": [BUCKET_ID, "Arn"]}, f"/{KEY_PREFIX}*"]]}


def _tell_missing() -> dict[str, Any]:
    """Listing the bucket: then a missing object answers 404, not 403 (a listing shows keys, never params)."""
    return {
        "Sid": "TellMissingParams",
        "Effect": "Allow",
        "Action": ["s3:ListBucket"],
        "Resource": {"Fn::GetAtt": [BUCKET_ID, "Arn"]},
    }


def payload_statements(*, read: Iterable[str] = (), write: bool = False, end: bool = False) -> list[dict[str, Any]]:
    """IAM statements on the payload bucket: read the params of the ``read``
    types (and list the bucket, so that a missing object answers 404, not 403:
    the keys name types, domains and job IDs, never params); with ``end``,
    remove those types' objects (a runner, once their job has ended); and,
    with ``write``, write params objects (``params/*``, whatever the types: an
    object runs nothing, and a runner reads only the object its message names
    by the job's own key, and sending that message is SQS's permission)."""
    statements: list[dict[str, Any]] = []
    read = sorted(set(read))
    if read:
        statements.append(
            {"Sid": "ReadOwnTypesParams", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": _objects(read)}
        )
        if end:
            statements.append(
                {
                    "Sid": "RemoveEndedJobsParams",
                    "Effect": "Allow",
                    "Action": ["s3:DeleteObject"],
                    "Resource": _objects(read),
                }
            )
        statements.append(_tell_missing())
    if write:
        statements.append(
            {"Sid": "WriteParams", "Effect": "Allow", "Action": ["s3:PutObject"], "Resource": _all_objects()}
        )
    return statements


def operator_payload_statements() -> list[dict[str, Any]]:
    """An operator's: read every params object (``jobkit dlq show --params``, the web view), list the
    bucket (404 for a missing one), and write params objects (``jobkit push`` of a large job)."""
    return [
        {
            "Sid": "ReadAndWriteParams",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": _all_objects(),
        },
        _tell_missing(),
    ]


def payload_resources() -> dict[str, Any]:
    """The bucket and its TLS-only policy."""
    return {
        BUCKET_ID: {**payload_bucket(), "Metadata": checkov_skips("CKV_AWS_18", "CKV_AWS_21")},
        "PayloadBucketPolicy": {
            "Type": "AWS::S3::BucketPolicy",
            "Properties": {
                "Bucket": {"Ref": BUCKET_ID},
                "PolicyDocument": tls_only_policy({"Fn::GetAtt": [BUCKET_ID, "Arn"]}),
            },
        },
    }


def payload_outputs() -> dict[str, Any]:
    return {
        "PayloadBucketName": {
            "Description": "The payload bucket: an app outside the stack sets $JOBKIT_PAYLOAD_BUCKET to it",
            "Value": {"Ref": BUCKET_ID},
        }
    }


#: The environment variable that names the bucket to a function.
PAYLOAD_VARIABLE = {"JOBKIT_PAYLOAD_BUCKET": {"Ref": BUCKET_ID}}
