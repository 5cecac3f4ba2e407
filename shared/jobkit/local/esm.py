"""An emulator of Lambda's SQS event source mapping.

It does what the AWS poller does for a function with ReportBatchItemFailures:

- receive up to ``batch_size`` messages (several ReceiveMessage calls of at most 10);
- invoke the handler with a Lambda-shaped SQS event, ``ApproximateReceiveCount`` included;
- delete the messages that succeeded; leave the reported failures to reappear
  when their visibility timeout ends;
- treat a handler exception, or a response naming an unknown or empty
  ``itemIdentifier``, as a failure of the whole batch (AWS does the same);
- stop a handler at the function's timeout as Lambda does: a handler that
  returns after its deadline (on the stack's clock) timed out, and its
  response is lost, so the whole batch returns to the queue, the jobs that
  ran included. (In one process the handler cannot be killed mid-job: what
  it did before returning stays done, as what a killed invocation did before
  its deadline does on AWS.)
- survive SQS errors as the poller does: a failed ReceiveMessage is tried
  again (the poller never stops polling), and a failed delete leaves the
  messages to reappear after their visibility timeout (at-least-once);
- with a :class:`~jobkit.local.recursion.RecursionGuard`, not invoke the
  function with a message of a chain that has invoked it 16 times, when its
  ``RecursiveLoop`` is ``Terminate``: the message reappears after its
  visibility timeout, and goes to the DLQ after ``maxReceiveCount`` receives.

Redrive to the DLQ at ``maxReceiveCount`` is SQS's job, and moto does it.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock, SystemClock
from jobkit.local.lambda_context import FakeLambdaContext
from jobkit.local.recursion import RecursionGuard
from jobkit.sqs import delete_in_chunks, new_messages, receive_messages

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any], Any], Any]

#: Failed ReceiveMessage calls retried in one poll before it gives up for this round.
MAX_RECEIVE_RETRIES = 5


class EventSourceMapping:
    """Polls one queue and feeds batches to one handler.

    ``receivable``, if given, tells whether the queue has a message that a
    receive would return now; then a ReceiveMessage that would come back
    empty is not sent (the local stack knows without asking moto).
    """

    def __init__(
        self,
        sqs_client: SQSClient,
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
        receivable: Callable[[], bool] | None = None,
        recursion: RecursionGuard | None = None,
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
        self._receivable = receivable
        self.recursion = recursion or RecursionGuard(function_name, "Allow")
        self.invocations = 0
        self.receive_errors = 0  # failed ReceiveMessage calls (retried)
        self.delete_errors = 0  # messages whose delete failed (they are delivered again)
        self.timeouts = 0  # invocations that ran past the function's timeout

    def poll(self) -> int:
        """Receive one batch and invoke the handler with it. Returns the batch size (0 if empty)."""
        messages = self._receive()
        if not messages:
            return 0
        return self.deliver(messages)

    def deliver(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Invoke the handler with messages already received (ReceiveMessage shape),
        then delete the ones it did not report as failed. Calling it twice with
        the same messages is SQS delivering them twice. Returns the batch size."""
        received = len(messages)
        messages, stopped = self.recursion.admit(messages)
        if stopped:  # left in flight: they reappear after their visibility timeout
            log.warning(
                "%d message(s) not delivered to %s: a recursive loop (RecursiveLoop: %s)",
                len(stopped),
                self._function_name,
                self.recursion.recursive_loop,
            )
        if not messages:
            return received
        event = sqs_event(messages, self.queue_arn, self._region)
        context = FakeLambdaContext(
            function_name=self._function_name,
            timeout_s=self._timeout_s,
            memory_limit_in_mb=self._memory_mb,
            region=self._region,
            clock=self._clock,
        )
        self.invocations += 1
        deadline = self._clock.now() + self._timeout_s
        try:
            with self.recursion.invocation(messages):
                response = self._handler(event, context)
        except Exception:
            log.exception("handler raised: the whole batch of %d returns to the queue", len(messages))
            return received
        if self._clock.now() > deadline:
            self.timeouts += 1
            log.error(
                "%s timed out after %s s: no response, the whole batch of %d returns to the queue",
                self._function_name,
                self._timeout_s,
                len(messages),
            )
            return received
        failed = self._failed_ids(response, {m["MessageId"] for m in messages})
        if failed is None:
            log.error("handler returned an invalid batchItemFailures response: the whole batch fails")
            return received
        self._delete([m for m in messages if m["MessageId"] not in failed])
        return received

    def _receive(self) -> list[MessageTypeDef]:
        failures = 0

        def receive(wanted: int) -> list[MessageTypeDef]:
            nonlocal failures
            if self._receivable is not None and not self._receivable():
                return []  # what SQS would answer, without asking
            while failures <= MAX_RECEIVE_RETRIES:
                try:
                    return receive_messages(self._sqs, self.queue_url, wanted, wait_time_s=0)
                except Exception:  # botocore's ClientError or BotoCoreError: poll again
                    failures += 1
                    self.receive_errors += 1
                    log.warning("ReceiveMessage failed (%d in a row)", failures, exc_info=True)
            return []  # give up for this round

        return [message for batch in new_messages(receive, limit=self.batch_size) for message in batch]

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

    def _delete(self, messages: Sequence[Mapping[str, Any]]) -> None:
        for chunk in delete_in_chunks(
            self._sqs, self.queue_url, messages, lambda m: m["ReceiptHandle"], catching=(Exception,)
        ):
            if chunk.error is not None:  # the messages reappear after their visibility timeout: at-least-once
                self.delete_errors += len(chunk.items)
                log.warning(
                    "DeleteMessageBatch failed: %d message(s) will be delivered again",
                    len(chunk.items),
                    exc_info=chunk.error,
                )
            elif chunk.failed:
                self.delete_errors += len(chunk.failed)
                log.warning("DeleteMessageBatch: %d message(s) not deleted will be delivered again", len(chunk.failed))


def sqs_event(messages: Sequence[Mapping[str, Any]], queue_arn: str, region: str = "us-east-1") -> dict[str, Any]:
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
                "binaryValue": _base64(value.get("BinaryValue")),
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


def _base64(value: bytes | None) -> str | None:
    """Lambda's event carries a binary attribute as base64 text (ReceiveMessage
    through boto3 gives the bytes)."""
    return None if value is None else base64.b64encode(value).decode("ascii")
