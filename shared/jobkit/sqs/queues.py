"""Queues by name: where they are (:class:`QueueDirectory`), and the queue
operations the runner performs itself (:class:`SqsQueues`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobkit.declaration.config import Declaration
from jobkit.declaration.lanes import Lane
from jobkit.sqs.attributes import (
    ORIGINAL_MESSAGE_ATTRIBUTE,
    DeadLetterReason,
    by_priority,
    dead_letter_copy,
    first_seen_attribute,
    sendable_attributes,
    string_attribute,
    system_attributes,
)
from jobkit.sqs.limits import MAX_ATTRIBUTES, MAX_VISIBILITY_S, delay_seconds

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from jobkit.sqs.attributes import AttributeValue

log = logging.getLogger(__name__)


class QueueDirectory:
    """Resolves SQS queue names to URLs: from a given map (the deployed stack
    passes its URLs in the environment), else with one GetQueueUrl per queue
    per process, cached."""

    def __init__(self, sqs_client: SQSClient, declaration: Declaration, urls: Mapping[str, str] | None = None) -> None:
        self._client = sqs_client
        self._declaration = declaration
        self._urls: dict[str, str] = dict(urls or {})
        self._lock = threading.Lock()
        self._lanes = {declaration.queue_name(lane.key): lane for q in declaration.queues.values() for lane in q.lanes}

    def url(self, sqs_name: str) -> str:
        url = self._urls.get(sqs_name) or self._spelled(sqs_name)
        if url is None:
            url = self._client.get_queue_url(QueueName=sqs_name)["QueueUrl"]
            with self._lock:
                self._urls[sqs_name] = url
        return url

    def _spelled(self, sqs_name: str) -> str | None:
        """The URL of a priority lane (or its DLQ), spelled from its queue's: an
        SQS URL ends in the queue's name, and a queue's lanes are in its account
        and Region. The deployed stack passes only the queues' own URLs (Lambda's
        environment is 4 KB), and a lane then costs no GetQueueUrl."""
        lane = self._lanes.get(sqs_name.removesuffix("-dlq"))
        known = None if lane is None else self._urls.get(self._declaration.queue_name(lane.queue))
        if lane is None or lane.priority is None or known is None:
            return None
        return f"{known.rsplit('/', 1)[0]}/{sqs_name}"

    def sqs_name(self, queue: str) -> str:
        """The SQS name of a declared queue."""
        return self._declaration.queue_name(queue)

    def queue_url(self, job_type: str, priority: str | None = None) -> str:
        """The URL of the queue (or of its priority lane) that serves a declared job type.

        Raises:
            SpecError: the type's queue has no lane of that priority, naming those it has.
        """
        return self.url(self._declaration.queue_name(self._declaration.lane(job_type, priority).key))

    def dlq_url_for(self, sqs_name: str) -> str:
        """The DLQ URL of a jobkit queue (or lane), given the queue's SQS name."""
        lane = self._lanes.get(sqs_name)
        if lane is None:
            raise KeyError(f"{sqs_name} is not a queue of this declaration")
        return self.url(self._declaration.dlq_name(lane.key))

    def declared_queue(self, sqs_name: str) -> str | None:
        """The declared queue of an SQS queue name (one of its lanes' names, or its own)."""
        lane = self._lanes.get(sqs_name)
        return None if lane is None else lane.queue

    def lane(self, sqs_name: str) -> Lane | None:
        """The lane an SQS queue name is (a queue's default lane, or a priority lane of it)."""
        return self._lanes.get(sqs_name)

    def lane_names(self, queue: str) -> dict[str, Lane]:
        """A declared queue's lanes by SQS name, its own among them."""
        return {name: lane for name, lane in self._lanes.items() if lane.queue == queue}


class SqsQueues:
    """The queue operations a runner needs beyond what the event source
    mapping does for it: visibility backoff, dead-lettering, re-enqueueing.
    Bound to the runner's one queue (a declared queue name): every record it
    handles came from one of its lanes (:mod:`jobkit.declaration.lanes`), and
    each operation is on the record's own lane, named by its ``eventSourceARN``
    (a record from elsewhere, a hand-made event's, is taken for the default lane's)."""

    def __init__(self, sqs_client: SQSClient, directory: QueueDirectory, queue: str) -> None:
        self._client = sqs_client
        self._directory = directory
        self._queue = queue
        self._own = directory.sqs_name(queue)
        self._lanes = directory.lane_names(queue)  # (a queue without priority lanes: its own alone)

    def sqs_name(self, record: Mapping[str, Any]) -> str:
        """The SQS name of the lane the record came from."""
        if len(self._lanes) < 2:
            return self._own
        arn = record.get("eventSourceARN")
        name = arn.rsplit(":", 1)[-1] if isinstance(arn, str) else ""
        return name if name in self._lanes else self._own

    def priority(self, record: Mapping[str, Any]) -> str | None:
        """The priority lane the record came from (None: its queue's default lane)."""
        lane = self._lanes.get(self.sqs_name(record))
        return None if lane is None else lane.priority

    def _url(self, record: Mapping[str, Any]) -> str:
        return self._directory.url(self.sqs_name(record))

    def change_visibility(self, record: Mapping[str, Any], seconds: int) -> None:
        self._client.change_message_visibility(
            QueueUrl=self._url(record),
            ReceiptHandle=record["receiptHandle"],
            VisibilityTimeout=max(0, min(MAX_VISIBILITY_S, int(seconds))),
        )

    def dead_letter(self, record: Mapping[str, Any], reason: DeadLetterReason, now: float) -> None:
        """Copy the message to its queue's DLQ with the reason attached (and
        its ``MessageGroupId``, so a redrive keeps its tenant, and the time SQS
        first saw the job, so a redrive keeps its place in time), then delete
        the original. If the copy fails, it raises and the original is
        left alone. Once the copy is sent, the job is dead-lettered: a failed
        delete is left to the event source mapping, which deletes every record
        the handler does not report as failed (reporting it would only make a
        second DLQ copy)."""
        source = self.sqs_name(record)
        body, attributes = dead_letter_copy(
            record["body"],
            {
                **reason.attributes(source, now),
                **first_seen_attribute(record),
                **(_original_id(record) if reason.kind == "poison" else {}),
            },
            by_priority(sendable_attributes(record.get("messageAttributes") or {})),
        )
        self._client.send_message(
            **_in_group(
                record, QueueUrl=self._directory.dlq_url_for(source), MessageBody=body, MessageAttributes=attributes
            )
        )
        try:
            self.delete(record)
        except Exception:
            log.warning("dead-lettered %s, but could not delete the original: the poller will", record["messageId"])

    def delete(self, record: Mapping[str, Any]) -> None:
        self._client.delete_message(QueueUrl=self._url(record), ReceiptHandle=record["receiptHandle"])

    def requeue(
        self, record: Mapping[str, Any], delay_s: int, extra_attributes: Mapping[str, AttributeValue] | None = None
    ) -> str:
        """Send a new copy of a message to its own queue (its lane: a delay hop or a
        deferral): the same body and ``MessageGroupId``, the sender's own
        attributes (never a ``jobkit.*`` one it carried), and
        ``extra_attributes``. Returns the copy's message ID.

        SQS takes at most 10 attributes; the runner's own come first, and a
        sender's that do not fit beside them are dropped (and logged), so that
        a message with 10 of its own can still hop."""
        extra = dict(extra_attributes or {})
        # the type (which ops filter by), the correlation ID and the trace context first
        own = by_priority(sendable_attributes(record.get("messageAttributes") or {}))
        kept = {name: own[name] for name in list(own)[: max(0, MAX_ATTRIBUTES - len(extra))]}
        if len(kept) < len(own):
            dropped = ", ".join(sorted(set(own) - set(kept)))
            log.warning("re-enqueued %s without its attributes %s: SQS takes 10", record["messageId"], dropped)
        attributes = {**kept, **extra}
        response = self._client.send_message(
            **_in_group(
                record,
                QueueUrl=self._url(record),
                MessageBody=record["body"],
                DelaySeconds=delay_seconds(delay_s),
                MessageAttributes=attributes,
            )
        )
        return str(response["MessageId"])


def _in_group(record: Mapping[str, Any], **request: Any) -> dict[str, Any]:
    """A SendMessage request for a copy of a received record, in the record's
    own ``MessageGroupId`` (its tenant in a fair queue), if it had one, and
    with its producer's X-Ray trace header. Lambda's event carries both in the
    record's ``attributes``."""
    group_id = (record.get("attributes") or {}).get("MessageGroupId")
    if group_id:
        request["MessageGroupId"] = group_id
    trace = system_attributes(record)
    if trace:
        request["MessageSystemAttributes"] = trace
    return request


def _original_id(record: Mapping[str, Any]) -> dict[str, Any]:
    """The copied message's ID, so that the ID in the runner's logs finds its
    DLQ copy. Only an unreadable message's copy carries it: a job's copy is
    found by its job ID, and keeps room for its sender's ``traceparent``."""
    message_id = record.get("messageId") or record.get("MessageId")
    return {ORIGINAL_MESSAGE_ATTRIBUTE: string_attribute(message_id)} if isinstance(message_id, str) else {}
