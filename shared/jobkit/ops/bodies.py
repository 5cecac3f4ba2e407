"""Reading a dead letter's body, whatever it holds.

A DLQ holds whatever reached a job queue, and anyone with ``sqs:SendMessage``
on it can send anything SQS carries: text that is not JSON, JSON nested
10,000 deep, a ``\\ud800`` escape that decodes to a lone surrogate (not
Unicode text: printing or encoding it raises), a 400-digit number. The ops
tools must show, redrive and delete every such message, never crash on one.

So a body is read once, here, and only in ways that cannot raise:

- as a job, with :meth:`JobSpecification.from_message`, which raises only
  :class:`SpecError` (the runner's own parse);
- as JSON to show, only when it decodes *and* encodes again as strict JSON
  in valid UTF-8 (no lone surrogate, no ``Infinity``, no duplicate key);
  otherwise the raw text is shown instead;
- every text shown goes through :func:`safe_text`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobkit.core.errors import SpecError
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import is_reference
from jobkit.payloads.reference import ParamsRef, reference_of, resolved
from jobkit.sqs import MAX_JOB_BYTES, message_size, sendable_attributes

#: How much of a body that is not a job the listings show.
BODY_START_CHARS = 120


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate replaced, so it can be printed and encoded."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def showable_json(body: str) -> Any:
    """The decoded body, if it is JSON that can be written out again as strict
    JSON in valid UTF-8; ``None`` otherwise (show the raw text instead)."""
    try:
        data = json.loads(body, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
        json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError and JSONDecodeError are ValueErrors
        return None
    return data


@dataclass(frozen=True)
class Body:
    """What a body is.

    Attributes:
        spec: the job, if the body parses as one (the runner's parse).
        data: the decoded body, when it can be shown as JSON (see :func:`showable_json`).
        problem: why it is not a job the runner could take, in the tool's own
            words (a parse error, or a body too big to be a job); ``None`` if it is one.
        problem_class: the error class of ``problem``.
    """

    spec: JobSpecification | None
    data: Any
    problem: str | None
    problem_class: str | None
    params_ref: ParamsRef | None = None  # its params are in the payload bucket (``spec.params`` is empty)


def read_body(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> Body:
    """Read a DLQ message's body as the runner would: its size with its own
    attributes first, then the parse. Never raises."""
    data = showable_json(body)
    oversize = _oversize(body, attributes)
    ref = None
    try:
        if is_reference(data):  # its params in the payload bucket: the job, without them
            ref = reference_of(data)
            spec = JobSpecification.from_dict(resolved(data, {}))
        else:
            spec = JobSpecification.from_message(body)
    except SpecError as exc:
        return Body(None, data, safe_text(oversize or str(exc)), "SpecError")
    return Body(spec, data, oversize, "SpecError" if oversize else None, ref)


def body_start(body: str) -> str:
    return safe_text(body[:BODY_START_CHARS])


def _oversize(body: str, attributes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The runner's size rule. The DLQ copy has at most the attributes the
    original had, so a copy over the limit means the original was too."""
    try:
        size = len(body.encode("utf-8", "surrogatepass")) + message_size("", sendable_attributes(attributes))
    except (UnicodeError, KeyError, TypeError, AttributeError):  # attributes SQS would not have delivered
        return None
    if size <= MAX_JOB_BYTES:
        return None
    return f"message is {size} bytes with its attributes, over the {MAX_JOB_BYTES} a job may have"


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError("a key given twice")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
