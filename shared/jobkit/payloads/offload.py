"""What push does with a job whose message is too large: its params go to the
payload bucket, and the message carries the reference (wire version 3).

A job is offloaded when its message (body and attributes) is over the
threshold: by default what fits in one SQS message, so only a job that could
not be sent otherwise is. The upload comes first: a send that then fails
leaves an object no message names, which the bucket's lifecycle rule removes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobkit.core.errors import SpecError
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import sqs_json
from jobkit.payloads.reference import MAX_PARAMS_BYTES, params_bytes, reference_body, reference_for
from jobkit.payloads.store import PayloadStore
from jobkit.sqs.limits import MAX_JOB_BYTES, RUNNER_RESERVED_BYTES, message_size


def fitted(
    spec: JobSpecification, attributes: Mapping[str, Any], store: PayloadStore | None, threshold: int
) -> tuple[str, int]:
    """The job's message body and its size: inline, or with its params in the
    bucket if the message is over ``threshold`` and there is a bucket.

    Raises:
        SpecError: naming the job: a message over :data:`~jobkit.sqs.MAX_JOB_BYTES`
            with no bucket, or params over :data:`~jobkit.payloads.reference.MAX_PARAMS_BYTES`.
        botocore's errors: the upload failed (the job is not sent).
    """
    body = spec.to_message()
    size = message_size(body, attributes)
    if size > threshold and store is not None:
        body = _offload(spec, store, attributes)
        size = message_size(body, attributes)
    if size > MAX_JOB_BYTES:
        remedy = "" if store is not None else " give the stack its payload bucket ($JOBKIT_PAYLOAD_BUCKET), or"
        raise SpecError(
            f"{spec.type} {spec.id}: message is {size} bytes, over the {MAX_JOB_BYTES} a job may have"
            f" (the SQS limit less {RUNNER_RESERVED_BYTES} bytes the runner needs to re-enqueue it);"
            f"{remedy} pass a reference (an S3 key, a page ID) instead of the data"
        )
    return body, size


def _offload(spec: JobSpecification, store: PayloadStore, attributes: Mapping[str, Any]) -> str:
    """Upload the job's params; the v3 body that refers to them. Nothing is
    uploaded for a job whose message would still not fit."""
    data = params_bytes(spec.params)
    if len(data) > MAX_PARAMS_BYTES:
        raise SpecError(
            f"{spec.type} {spec.id}: params are {len(data)} bytes, over the {MAX_PARAMS_BYTES} a job may have"
            " in the payload bucket; pass a reference (an S3 key, a page ID) instead of the data"
        )
    ref = reference_for(spec.type, spec.domain, spec.id, data)
    # (SQS's characters, as the inline body has them: the body's other fields are sent as given)
    body = sqs_json(json.dumps(reference_body(spec.to_dict(), ref), separators=(",", ":"), ensure_ascii=False))
    if message_size(body, attributes) <= MAX_JOB_BYTES:
        store.put(ref, data)
    return body
