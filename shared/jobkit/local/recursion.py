"""Lambda's recursive loop detection, modelled for the local stack.

On AWS, a message that an invocation sends to SQS carries the invocation's
X-Ray trace header (the SDK adds it to every request inside Lambda), and SQS
keeps it as the message's ``AWSTraceHeader``. Its ``Lineage`` field counts,
per function, how many invocations of that function the chain of requests
has had (``Lineage=a87bd80c:3|68fd508a:1``: a hash of the function, a count).
When a function whose ``RecursiveLoop`` is ``Terminate`` (Lambda's default)
would be invoked a 17th time in one chain, Lambda does not invoke it: the SQS
message goes back to its queue and, after ``maxReceiveCount`` receives, to the
DLQ, with no reason, and the function's ``RecursiveInvocationsDropped`` metric
counts it. (AWS Lambda guide, "Use Lambda recursive loop detection to prevent
infinite loops".)

jobkit's chains are loops by design (delay hops, a recursive fan-out's
remnants, deferrals, holds, debounce waits), so its runners are deployed with
``RecursiveLoop: Allow`` (:data:`jobkit.core.resources.RUNNER_RECURSIVE_LOOP`).
The local stack models the detection so that a stack without it shows what
AWS would do:

- :class:`RecursionGuard` decides, per function, which messages of a batch
  Lambda would not deliver;
- :func:`invocation` sets the lineage of the invocation in progress (one more
  than the highest of its messages), and :func:`stamp_sends` makes every
  ``SendMessage`` and ``SendMessageBatch`` of a client during an invocation
  carry it, as the SDK's trace header does. A message that names its own
  ``AWSTraceHeader`` (the runner copies the received one onto its re-sends)
  keeps its root and the higher count of the two, per function: how AWS
  merges the two is not documented, and the higher count is the one that
  stops a chain soonest.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

#: Lambda invokes a function at most this many times in one chain of requests.
MAX_ROUNDS = 16
ALLOW, TERMINATE = "Allow", "Terminate"
XRAY = "AWSTraceHeader"
#: The root of a header made for a message that had none.
NO_TRACE = "Root=1-00000000-000000000000000000000000"

#: A lineage count as Lambda writes it: a few ASCII digits.
_COUNT = re.compile(r"[0-9]{1,9}")

#: The lineage of the invocation in progress (in this thread or task), if any.
_current: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("jobkit_lineage", default=None)


def function_key(function_name: str) -> str:
    """A function's key in a lineage: 8 hex digits of a hash of its name."""
    return hashlib.sha256(function_name.encode()).hexdigest()[:8]


def lineage_of(header: str | None) -> dict[str, int]:
    """The ``Lineage`` field of an X-Ray trace header, as {function key: count}."""
    for part in (header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name != "Lineage":
            continue
        counts: dict[str, int] = {}
        for entry in value.split("|"):
            key, _, count = entry.partition(":")
            if key and _COUNT.fullmatch(count):  # a malformed entry (a sender's) counts nothing
                counts[key] = max(counts.get(key, 0), int(count))
        return counts
    return {}


def with_lineage(header: str | None, lineage: Mapping[str, int]) -> str:
    """``header`` with its lineage raised to ``lineage`` (the higher count per function)."""
    merged = lineage_of(header)
    for key, count in lineage.items():
        merged[key] = max(merged.get(key, 0), count)
    kept = (header or NO_TRACE).split(";")
    parts = [part for part in kept if part and not part.startswith("Lineage=")]
    if merged:
        parts.append("Lineage=" + "|".join(f"{key}:{count}" for key, count in sorted(merged.items())))
    return ";".join(parts)


def record_header(record: Mapping[str, Any]) -> str | None:
    """A received message's ``AWSTraceHeader`` (an event record's or ReceiveMessage's)."""
    attributes = record.get("attributes") or record.get("Attributes") or {}
    header = attributes.get(XRAY) if isinstance(attributes, Mapping) else None
    return header if isinstance(header, str) else None


class RecursionGuard:
    """What Lambda's recursive loop detection does to one function's batches."""

    def __init__(self, function_name: str, recursive_loop: str | Callable[[], str]) -> None:
        """``recursive_loop`` is the function's setting, or a function that reads
        it (the deployed function's, which ``PutFunctionRecursionConfig`` changes)."""
        self.function_name = function_name
        self.key = function_key(function_name)
        if isinstance(recursive_loop, str):
            recursive_loop = _fixed(_valid(recursive_loop))
        self._setting = recursive_loop
        #: Messages Lambda did not deliver (the ``RecursiveInvocationsDropped`` metric).
        self.dropped = 0

    @property
    def recursive_loop(self) -> str:
        return _valid(self._setting())

    def rounds(self, record: Mapping[str, Any]) -> int:
        """Invocations of this function in the message's chain so far."""
        return lineage_of(record_header(record)).get(self.key, 0)

    def admit(self, records: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
        """The batch's messages split into (delivered, stopped)."""
        if self.recursive_loop == ALLOW:
            return list(records), []
        delivered = [r for r in records if self.rounds(r) < MAX_ROUNDS]
        stopped = [r for r in records if self.rounds(r) >= MAX_ROUNDS]
        self.dropped += len(stopped)
        return delivered, stopped

    @contextlib.contextmanager
    def invocation(self, records: Sequence[Mapping[str, Any]]) -> Iterator[None]:
        """The invocation of the function with ``records``: one more round of its chain."""
        lineage: dict[str, int] = {}
        for record in records:
            for key, count in lineage_of(record_header(record)).items():
                lineage[key] = max(lineage.get(key, 0), count)
        lineage[self.key] = lineage.get(self.key, 0) + 1
        token = _current.set(lineage)
        try:
            yield
        finally:
            _current.reset(token)


def _valid(setting: str) -> str:
    if setting not in (ALLOW, TERMINATE):
        raise ValueError(f"RecursiveLoop is {ALLOW!r} or {TERMINATE!r}, not {setting!r}")
    return setting


def _fixed(setting: str) -> Callable[[], str]:
    return lambda: setting


def stamp_sends(client: Any) -> None:
    """Make the SQS client's sends during an invocation carry its lineage, as the SDK does in Lambda."""
    client.meta.events.register("before-parameter-build.sqs.SendMessage", _stamp_message)
    client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", _stamp_batch)


def _stamp_message(params: dict[str, Any], **_: Any) -> None:
    lineage = _current.get()
    if lineage is not None:
        _stamp(params, lineage)


def _stamp_batch(params: dict[str, Any], **_: Any) -> None:
    lineage = _current.get()
    if lineage is not None:
        for entry in params.get("Entries") or []:
            _stamp(entry, lineage)


def _stamp(entry: dict[str, Any], lineage: Mapping[str, int]) -> None:
    system = dict(entry.get("MessageSystemAttributes") or {})
    given = system.get(XRAY, {}).get("StringValue")
    system[XRAY] = {"DataType": "String", "StringValue": with_lineage(given, lineage)}
    entry["MessageSystemAttributes"] = system
