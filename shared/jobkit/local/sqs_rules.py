"""What SQS keeps or refuses that moto does not: applied to the embedded moto,
so that the local stack behaves as AWS does (docs/aws-differences.md lists each).

- **Batch sends keep their system attributes.** moto's ``SendMessageBatch``
  drops each entry's ``MessageSystemAttributes`` (its ``SendMessage`` keeps
  them); SQS keeps ``AWSTraceHeader`` on every message, and Lambda's recursive
  loop detection reads it (:mod:`jobkit.local.recursion`).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def sqs_rules() -> Iterator[None]:
    backend_class: Any = importlib.import_module("moto.sqs.models").SQSBackend
    original_batch = backend_class.send_message_batch

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        messages, failed = original_batch(self, queue_name, entries)
        by_id = {entry["Id"]: entry for entry in entries.values()}
        for message in messages:
            system = by_id.get(getattr(message, "user_id", None), {}).get("MessageSystemAttributes")
            if system:
                message.system_attributes = dict(system)
        return messages, failed

    backend_class.send_message_batch = send_message_batch
    try:
        yield
    finally:
        backend_class.send_message_batch = original_batch
