"""Fairness: the ``MessageGroupId`` a job's message carries, from its type's key.

SQS fair queues treat the messages that share a ``MessageGroupId`` as one
tenant, and when one tenant builds a backlog they deliver the quiet tenants'
messages first. The push SDK sets the group from the type's ``fairness`` key
(docs/flow-control.md, "Fairness"):

- ``"domain"``: the job's domain;
- ``"params.NAME"``: the param's value (strings as they are, other values as
  compact JSON);
- ``"type"``: the type's name;

and sets none when fairness is off or the job has no value for the key (no
domain, no such param): then each message is a tenant of its own.

A group ID holds 1 to 128 characters, letters, digits and ASCII punctuation.
A value that does not fit, or that starts with ``h:``, is replaced by ``h:``
and its SHA-1, so two values never share a group by truncation, and a value
is never taken for another's hash.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from jobkit.flow.options import NO_VALUE

if TYPE_CHECKING:
    from jobkit.core.spec import JobSpecification
    from jobkit.flow.options import FlowKey

#: What SQS takes as a MessageGroupId: alphanumerics and punctuation (``!`` to ``~``), 1 to 128 of them.
GROUP_ID = re.compile(r"[!-~]{1,128}")

#: The prefix of a group ID that stands for a value too long or odd to be one.
HASHED = "h:"


def message_group_id(key: FlowKey | None, spec: JobSpecification) -> str | None:
    """The ``MessageGroupId`` of a job's message, or None for none."""
    if key is None:
        return None
    value = key.value(spec)
    if value == "*":
        return spec.type
    if value == NO_VALUE:
        return None
    if value.startswith("#"):  # a value over the key's limit, already its SHA-1
        return HASHED + value[1:]
    return group_id(value[1:])


def group_id(text: str) -> str:
    """``text`` as a group ID: itself if SQS takes it, else ``h:`` and its SHA-1."""
    if GROUP_ID.fullmatch(text) and not text.startswith(HASHED):
        return text
    return HASHED + hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
