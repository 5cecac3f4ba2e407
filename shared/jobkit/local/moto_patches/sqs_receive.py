"""moto's SQS receive and delete over the index (:func:`indexed_queues`), and
its retention check reading only the attribute it needs (:func:`faster_receives`)."""

from __future__ import annotations

import contextlib
import copy
import importlib
from collections.abc import Iterator
from typing import Any

from jobkit.local.moto_patches.patching import patched
from jobkit.local.moto_patches.sqs_index import OWNERS, IndexedMessages, MessagesAttribute, index_of


@contextlib.contextmanager
def faster_receives() -> Iterator[None]:
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    backend_class = sqs_models.SQSBackend
    original = backend_class.is_message_valid_based_on_retention_period

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention_period = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention_period + message.sent_timestamp / 1000 > sqs_models.unix_time())

    backend_class.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
    try:
        yield
    finally:
        backend_class.is_message_valid_based_on_retention_period = original


@contextlib.contextmanager
def indexed_queues() -> Iterator[None]:
    """Index moto's SQS queues (:class:`IndexedMessages`), so that what SQS
    does per message costs the same however deep the queue is."""
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    queue_class, message_class, backend_class = sqs_models.Queue, sqs_models.Message, sqs_models.SQSBackend
    patches = [
        (queue_class, "_messages", MessagesAttribute()),
        (queue_class, "approximate_number_of_messages", property(lambda q: index_of(q).counts()[0])),
        (queue_class, "approximate_number_of_messages_delayed", property(lambda q: index_of(q).counts()[1])),
        (queue_class, "approximate_number_of_messages_not_visible", property(lambda q: index_of(q).counts()[2])),
        (queue_class, "delete_message", _delete_message(sqs_models)),
        (backend_class, "receive_message", _receive_message(sqs_models)),
    ]
    patches += [(message_class, name, _reporting(getattr(message_class, name))) for name in _MESSAGE_CHANGES]
    with patched(patches):
        try:
            yield
        finally:
            _unindex(sqs_models.sqs_backends)


#: The methods of moto's Message that change its visibility, delay or receipt handle.
_MESSAGE_CHANGES = ("change_visibility", "delay", "mark_received")


def _reporting(method: Any) -> Any:
    """``method``, then the message's index hears of the change."""

    def run(message: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(message, *args, **kwargs)
        index = OWNERS.get(message)
        if index is not None:
            index.changed(message)
        return result

    return run


def _delete_message(sqs_models: Any) -> Any:
    """moto's ``Queue.delete_message``, finding the message by its handle
    instead of testing every message twice."""

    def delete_message(self: Any, receipt_handle: str) -> None:
        if receipt_handle in self.deleted_messages:
            return  # deleted already: SQS accepts a second delete
        message = self._messages.find(receipt_handle)
        if message is None:
            raise sqs_models.ReceiptHandleIsInvalid()
        self.pending_messages.discard(message)
        self.deleted_messages.update(message.all_receipt_handles)
        self._messages.remove(message)

    return delete_message


def _receive_message(sqs_models: Any) -> Any:
    """moto's ``SQSBackend.receive_message``, step for step, except that it
    takes the receivable messages from the index instead of listing every
    visible one first."""

    def receive_message(
        self: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> list[Any]:
        queue = self.get_queue(queue_name)
        receive = _Receive(queue, visibility_timeout)
        result: list[Any] = []
        previous_result_count = 0
        polling_end = sqs_models.unix_time() + wait_seconds_timeout
        while not (result or (wait_seconds_timeout and sqs_models.unix_time() > polling_end)):
            with index_of(queue).receivable(fair=not queue.fifo_queue) as messages:
                for message in messages:
                    if not receive.take(message):
                        continue
                    if not self.is_message_valid_based_on_retention_period(queue_name, message):
                        break  # moto's way with a message past its retention: received, never returned
                    returned = copy.deepcopy(message)  # moto returns a copy, its attributes filtered
                    sqs_models._filter_message_attributes(returned, message_attribute_names or [])
                    result.append(returned)
                    if len(result) >= count:
                        break
            receive.move_to_dlq()
            if previous_result_count == len(result):
                if wait_seconds_timeout == 0:
                    break
                queue.wait_for_messages(1)
                continue
            previous_result_count = len(result)
        return result

    return receive_message


class _Receive:
    """What moto keeps during one receive: the FIFO groups in flight when it
    began, and the messages it moves to the DLQ once it has looked."""

    def __init__(self, queue: Any, visibility_timeout: int) -> None:
        self._queue = queue
        self._visibility_timeout = visibility_timeout
        self._groups_in_flight = copy.deepcopy(queue.pending_message_groups)
        self._to_dlq: list[Any] = []

    def take(self, message: Any) -> bool:
        """moto's test of one message: False if passed over (its FIFO group is
        in flight, or it goes to the DLQ), else it is marked received."""
        queue = self._queue
        if not message.visible:
            return False
        if message in queue.pending_messages:  # it was in flight, and its visibility timeout ran out
            queue.pending_messages.remove(message)
            self._groups_in_flight = copy.deepcopy(queue.pending_message_groups)
        if message.group_id and queue.fifo_queue and message.group_id in self._groups_in_flight:
            return False
        policy = queue.redrive_policy
        if (
            queue.dead_letter_queue is not None
            and policy
            and message.approximate_receive_count >= policy["maxReceiveCount"]
        ):
            self._to_dlq.append(message)
            return False
        queue.pending_messages.add(message)
        message.mark_received(visibility_timeout=self._visibility_timeout)
        index_of(queue).received(message)
        return True

    def move_to_dlq(self) -> None:
        for message in self._to_dlq:
            self._queue._messages.remove(message)
            self._queue.dead_letter_queue.add_message(message)
        self._to_dlq = []


def _unindex(sqs_backends: Any) -> None:
    """Give every queue back a plain list, in the same order."""
    for account in list(sqs_backends.values()):
        for backend in list(account.values()):
            for queue in list(backend.queues.values()):
                messages = queue.__dict__.get("_messages")
                if isinstance(messages, IndexedMessages):
                    queue.__dict__["_messages"] = list(messages)
