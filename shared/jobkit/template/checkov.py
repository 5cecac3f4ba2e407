"""The checkov findings that do not apply to the template, with why.

checkov reads these from each resource's ``Metadata``
(``checkov -f template.yaml --framework cloudformation``).
"""

from __future__ import annotations

from typing import Any

CHECKOV_SKIPS = {
    "CKV_AWS_27": (
        "Encrypted at rest with SSE-SQS (SqsManagedSseEnabled: true, keys owned by SQS, no KMS charges);"
        " this check only recognises SSE-KMS (KmsMasterKeyId)"
    ),
    "CKV_AWS_119": (
        "Encrypted at rest with the AWS managed key (SSESpecification.SSEEnabled). The table holds job IDs,"
        " dedup hashes, root timestamps, claims, and for 14 days failure and status records: the error"
        " messages jobs raise (which may quote params unless the job overrides Job.error_message) and the"
        " results of track_status types; never the params themselves (see docs/security.md). KMS charges"
        " apply to the AWS managed key only when DynamoDB refreshes its cached table key, not per request; a"
        " customer managed key would add a key policy to run and a monthly key charge"
    ),
    "CKV_AWS_18": (
        "The payload bucket holds only jobs' params, written by the stack's producers and read by its runners"
        " (both through IAM, which CloudTrail records); server access logs would add a second bucket and log"
        " every job's two requests"
    ),
    "CKV_AWS_21": (
        "A params object is written once, under a key that holds its SHA-256, and the runner checks the hash"
        " of what it reads; versions would only keep expired params for longer"
    ),
    "CKV_AWS_116": (
        "A function DLQ only catches failed asynchronous invocations; the event source mapping invokes the"
        " runner synchronously, and failed jobs go to the queue's own DLQ (redrive policy and the runner)"
    ),
    "CKV_AWS_117": (
        "The runner calls only AWS APIs (SQS, DynamoDB, CloudWatch Logs) over TLS with IAM auth and reaches"
        " no private resource; a VPC would add NAT or endpoint cost and isolate nothing"
    ),
    "CKV_AWS_115": (
        "Concurrency is capped per queue by the event source mapping's ScalingConfig.MaximumConcurrency;"
        " reserved concurrency would also take capacity from the account's pool, and set below that cap"
        " it throttles invocations that then return messages to the queue"
    ),
    "CKV_AWS_173": (
        "The environment holds no secrets and no job data (the declared types and their settings, the stack"
        " prefix, the queue name and URLs, the log level), and Lambda encrypts it at rest with its AWS managed"
        " key; see docs/security.md"
    ),
    "CKV_AWS_26": (
        "The topic carries only alarm state changes (alarm name, metric, threshold, time), no job data;"
        " CloudWatch alarms cannot publish to a topic encrypted with the AWS managed SNS key (alias/aws/sns),"
        " and a customer managed key would add a key policy to run and a KMS charge"
    ),
    "CKV_AWS_158": (
        "CloudWatch Logs encrypts every log group at rest by default; the only job-derived text in the"
        " runner's logs is the error messages jobs raise (params are logged at DEBUG only), kept for"
        " LogRetentionDays; a customer managed key would add a key policy to run. See docs/security.md"
    ),
}


def checkov_skips(*check_ids: str) -> dict[str, Any]:
    """A resource's ``Metadata`` that tells checkov to skip ``check_ids``, with the reasons."""
    return {"checkov": {"skip": [{"id": check_id, "comment": CHECKOV_SKIPS[check_id]} for check_id in check_ids]}}
