"""The push SDK's SQS: the transport a :class:`jobkit.push.JobQueueGroup` sends through."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from jobkit.declaration.config import Declaration
from jobkit.sqs.batches import Outgoing, SendResult, send_batch
from jobkit.sqs.queues import QueueDirectory

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

T = TypeVar("T")


class SqsPushTransport:
    """Routes job types to queue URLs (a :class:`QueueDirectory`) and sends
    batches with SendMessageBatch (see :class:`jobkit.push.PushTransport`).

    The client is made on first use, so building a
    transport makes no request and loads no AWS SDK.

    Args:
        declaration: routes job types to queues.
        sqs_client: a boto3 SQS client.
        sqs_client_factory: makes the client on first use, if ``sqs_client`` is not given.
        queue_urls: SQS queue name -> URL, to skip GetQueueUrl.
    """

    def __init__(
        self,
        declaration: Declaration,
        *,
        sqs_client: SQSClient | None = None,
        sqs_client_factory: Callable[[], SQSClient] | None = None,
        queue_urls: Mapping[str, str] | None = None,
    ) -> None:
        if sqs_client is not None:
            sqs_client_factory = _given(sqs_client)
        elif sqs_client_factory is None:
            raise TypeError("SqsPushTransport needs sqs_client or sqs_client_factory")
        self._declaration = declaration
        self._client_factory = sqs_client_factory
        self._queue_urls = dict(queue_urls or {})
        self._client: SQSClient | None = None
        self._directory: QueueDirectory | None = None
        self._urls: dict[tuple[str, str | None], str] = {}
        self._lock = threading.Lock()

    @property
    def client(self) -> SQSClient:
        with self._lock:
            if self._client is None:
                self._client = self._client_factory()
            return self._client

    @property
    def directory(self) -> QueueDirectory:
        client = self.client
        with self._lock:
            if self._directory is None:
                self._directory = QueueDirectory(client, self._declaration, self._queue_urls)
            return self._directory

    def queue_url(self, job_type: str, priority: str | None = None) -> str:
        # (each type's and lane's once: a push of many jobs asks for the same few)
        url = self._urls.get((job_type, priority))
        if url is None:
            url = self._urls[(job_type, priority)] = self.directory.queue_url(job_type, priority)
        return url

    def send_batch(self, batch: Sequence[Outgoing[T]]) -> SendResult[T]:
        return send_batch(self.client, batch)


def _given(client: SQSClient) -> Callable[[], SQSClient]:
    return lambda: client
