"""An emulator of Lambda's SQS event source mapping.

It does what the AWS poller does for a function with ReportBatchItemFailures:

- receive up to ``batch_size`` messages (several ReceiveMessage calls of at most 10);
- invoke the handler with a Lambda-shaped SQS event, ``ApproximateReceiveCount`` included;
- delete the messages that succeeded; leave the reported failures to reappear
  when their visibility timeout ends;
- treat a handler exception, or a response naming an unknown or empty
  ``itemIdentifier``, as a failure of the whole batch (AWS does the same).

Redrive to the DLQ at ``maxReceiveCount`` is SQS's job, and moto does it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from jobkit.clock import Clock, SystemClock
from jobkit.local.lambda_context import FakeLambdaContext

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]


class EventSourceMapping:
    """Polls one queue and feeds batches to one handler."""

    def __init__(
        self,
        sqs_client: Any,
        queue_url: str,
        queue_arn: str,
        handler: Handler,
        *,
        batch_size: int = 10,
        function_name: str = "jobkit-runner",
        timeout_s: float = 60.0,
        memory_mb: int = 256,
        clock: Clock | None = None,
        region: str = "us-east-1",
    ) -> None:
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.batch_size = batch_size
        self._sqs = sqs_client
        self._handler = handler
        self._function_name = function_name
        self._timeout_s = timeout_s
        self._memory_mb = memory_mb
        self._clock = clock or SystemClock()
        self._region = region
        self.invocations = 0

    def poll(self) -> int:
        """Receive one batch and invoke the handler with it. Returns the batch size (0 if empty)."""
        messages = self._receive()
        if not messages:
            return 0
        event = sqs_event(messages, self.queue_arn, self._region)
        context = FakeLambdaContext(
            function_name=self._function_name,
            timeout_s=self._timeout_s,
            memory_limit_in_mb=self._memory_mb,
            region=self._region,
            clock=self._clock,
        )
        self.invocations += 1
        try:
            response = self._handler(event, context)
        except Exception:
            log.exception("handler raised: the whole batch of %d returns to the queue", len(messages))
            return len(messages)
        failed = self._failed_ids(response, {m["MessageId"] for m in messages})
        if failed is None:
            log.error("handler returned an invalid batchItemFailures response: the whole batch fails")
            return len(messages)
        self._delete([m for m in messages if m["MessageId"] not in failed])
        return len(messages)

    def _receive(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while len(messages) < self.batch_size:
            response = self._sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, self.batch_size - len(messages)),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            received = response.get("Messages", [])
            if not received:
                break
            messages.extend(received)
        return messages

    @staticmethod
    def _failed_ids(response: Any, batch_ids: set[str]) -> set[str] | None:
        """The IDs to leave in the queue, or None if the response fails the whole batch."""
        if not response:
            return set()
        if not isinstance(response, Mapping):
            return set()  # Lambda ignores a non-object response: success
        failures = response.get("batchItemFailures") or []
        ids = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
            if not identifier or identifier not in batch_ids:
                return None
            ids.add(identifier)
        return ids

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            self._sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str = "us-east-1") -> dict[str, Any]:
    """A Lambda SQS event for messages from ReceiveMessage (as Lambda shapes it)."""
    return {"Records": [lambda_record(message, queue_arn, region) for message in messages]}


def lambda_record(message: Mapping[str, Any], queue_arn: str, region: str = "us-east-1") -> dict[str, Any]:
    """One ReceiveMessage message as a Lambda SQS event record."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
