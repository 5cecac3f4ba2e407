"""verify's canaries in the DLQs: found and deleted (its own only), read with
the reason the runner gave them, and the canaries earlier runs left counted.

A DLQ is scanned without consuming its other messages (:class:`QueueScan`):
a user's dead letter is read, never deleted or changed."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

from jobkit.ops.scan import QueueScan, string_attributes
from jobkit.ops.verify.check import call

#: The job IDs of verify's canaries start so (``canary-{run}-{check}-{queue}``).
CANARY_ID_PREFIX = "canary-"


class CanaryDeadLetters:
    """The canaries in a stack's DLQs.

    Args:
        sqs: the SQS client.
        dlq_url: the DLQ URL of a declared queue.
        run: this run's token: canaries of other runs are only counted.
    """

    def __init__(self, sqs: Any, dlq_url: Callable[[str], str], run: str) -> None:
        self._sqs = sqs
        self._dlq_url = dlq_url
        self._run = run
        #: Per queue, the canaries of earlier runs seen in its DLQ.
        self.earlier: dict[str, set[str]] = {}

    def take(self, queue: str, job_ids: Iterable[str]) -> int:
        """Delete the messages of these canaries from the queue's DLQ; returns how many."""
        wanted, url, taken = set(job_ids), self._dlq_url(queue), 0
        with QueueScan(self._sqs, url, visibility_timeout_s=10) as scan:
            for batch in call("sqs:ReceiveMessage", lambda: list(scan.batches())):
                for message in batch:
                    job_id = _job_id(message.get("Body"))
                    if job_id in wanted:
                        delete = functools.partial(
                            self._sqs.delete_message, QueueUrl=url, ReceiptHandle=message["ReceiptHandle"]
                        )
                        call("sqs:DeleteMessage", delete)
                        scan.forget([message["MessageId"]])
                        taken += 1
                    elif job_id is not None and self._earlier_canary(job_id):
                        self.earlier.setdefault(queue, set()).add(job_id)
        return taken

    def reasons(self, queue: str, job_ids: Iterable[str]) -> dict[str, str]:
        """The reasons the runner gave these canaries, if they are in the queue's
        DLQ (read, not deleted): what a failing check shows before the clean-up
        deletes them."""
        wanted, found = set(job_ids), {}
        with QueueScan(self._sqs, self._dlq_url(queue), visibility_timeout_s=10) as scan:
            for batch in call("sqs:ReceiveMessage", lambda: list(scan.batches())):
                for message in batch:
                    job_id = _job_id(message.get("Body"))
                    if job_id in wanted:
                        attributes = string_attributes(message.get("MessageAttributes") or {})
                        reason = attributes.get("jobkit.reason", "no reason: moved by the queue's redrive policy")
                        error = attributes.get("jobkit.error")
                        found[job_id] = reason + (f" ({error})" if error else "")
        return found

    def _earlier_canary(self, job_id: str) -> bool:
        return job_id.startswith(CANARY_ID_PREFIX) and not job_id.startswith(f"{CANARY_ID_PREFIX}{self._run}-")


def _job_id(body: Any) -> str | None:
    try:
        data = json.loads(body) if isinstance(body, str) else None
    except ValueError:
        return None
    return data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
