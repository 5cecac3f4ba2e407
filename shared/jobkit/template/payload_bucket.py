"""The payload bucket: where the params of jobs too large for a message go
(:mod:`jobkit.payloads`). Encrypted at rest, closed to the public, TLS only,
versioning off (an object is written once, under a key that holds its hash),
and every object expired once no message can name it any more: the longest a
job may wait for its release time, plus the DLQ's retention, plus a day. The
local stack creates it from these properties too (:mod:`jobkit.local.provision`).
"""

from __future__ import annotations

import math
from typing import Any

from jobkit.core.resources import DLQ_RETENTION_S
from jobkit.core.spec import MAX_RELEASE_DELAY_S
from jobkit.payloads.reference import KEY_PREFIX

#: Days a params object is kept: no message can name it after that.
PAYLOAD_EXPIRY_DAYS = math.ceil((MAX_RELEASE_DELAY_S + DLQ_RETENTION_S) / 86400) + 1
BUCKET_ID = "PayloadBucket"


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
