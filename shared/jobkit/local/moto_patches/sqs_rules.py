"""What SQS keeps or refuses that moto does not: applied to the embedded moto,
so that the local stack behaves as AWS does (docs/aws-differences.md lists each).

- **Batch sends keep their system attributes.** moto's ``SendMessageBatch``
  drops each entry's ``MessageSystemAttributes`` (its ``SendMessage`` keeps
  them); SQS keeps ``AWSTraceHeader`` on every message, and Lambda's recursive
  loop detection reads it (:mod:`jobkit.local.recursion`).
- **Only the characters SQS takes.** SQS refuses a message whose body or a
  string attribute value holds a character outside #x9 | #xA | #xD |
  #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF (``InvalidMessageContents``;
  a batch with one such entry is refused whole); moto takes anything.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from jobkit.core.wire import NOT_SQS_TEXT

ALLOWED = "#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF"


@contextlib.contextmanager
def sqs_rules() -> Iterator[None]:
    backend_class: Any = importlib.import_module("moto.sqs.models").SQSBackend
    error_class: Any = importlib.import_module("moto.sqs.exceptions").SQSException
    original_batch, original_send = backend_class.send_message_batch, backend_class.send_message

    def check(body: Any, attributes: Any) -> None:
        found = NOT_SQS_TEXT.search(body) if isinstance(body, str) else None
        where = "the message body"
        for name, attribute in (attributes or {}).items():
            value = attribute.get("StringValue") if isinstance(attribute, dict) else None
            if found is None and isinstance(value, str):
                found, where = NOT_SQS_TEXT.search(value), f"the message attribute {name}"
        if found is not None:
            raise error_class(
                "InvalidMessageContents",
                f"Invalid binary character '#x{ord(found.group()):X}' was found in {where}, the set of"
                f" allowed characters is {ALLOWED}",
            )

    def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        attributes = kwargs.get("message_attributes", args[0] if args else None)
        check(message_body, attributes)
        return original_send(self, queue_name, message_body, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        for entry in entries.values():  # the whole batch is refused, before any entry is sent
            check(entry.get("MessageBody"), entry.get("MessageAttributes"))
        messages, failed = original_batch(self, queue_name, entries)
        by_id = {entry["Id"]: entry for entry in entries.values()}
        for message in messages:
            system = by_id.get(getattr(message, "user_id", None), {}).get("MessageSystemAttributes")
            if system:
                message.system_attributes = dict(system)
        return messages, failed

    backend_class.send_message_batch, backend_class.send_message = send_message_batch, send_message
    try:
        yield
    finally:
        backend_class.send_message_batch, backend_class.send_message = original_batch, original_send
