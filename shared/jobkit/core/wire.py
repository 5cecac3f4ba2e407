"""The wire codec: a job's JSON body, decoded and checked (versions 1 and 2).

Every reader of message bodies (the runner, the DLQ tools) and every writer
(push) goes through here, so a body means one thing to all of them. The
schema is ``docs/job-spec.schema.json``; this module checks everything the
schema checks, and what a schema cannot say:

- a key given twice in one object is refused: parsers disagree on which one
  counts (Python's and Node's take the last, others the first), so such a
  body could run one type for one reader and another for the next;
- NaN and Infinity are not JSON, and a number beyond 2**53 is no time;
- a lone UTF-16 surrogate (a ``\\ud800`` escape without its pair) is not text.

Compatibility (docs/wire-format.md): ``v`` is the major version. A producer
may add an optional field without a new version: a reader that does not know
it ignores it, and the runner keeps it, since it re-enqueues and dead-letters
the body as it came; a spec parsed from a body keeps it too, and writes it
back (the push endpoint sends what it parsed). A field an older reader must
not ignore needs a new major version, which such a reader refuses as poison
with the reason.

Version 2 is version 1 and ``batch``: the body of a batch's member. A runner
that did not know batches would run the member and never count it, so the
batch would never complete: such a runner refuses a v2 body instead. A body
that is no batch's member stays version 1, so every runner reads it. A chain's
step is a batch, and its jobs' bodies carry ``chain`` beside ``batch``.

Nothing here imports a schema library: the runner's cold start pays for imports.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jobkit.core.errors import SpecError

if TYPE_CHECKING:
    from jobkit.core.chain_link import ChainLink

WIRE_VERSION = 1
#: A batch member's body: version 1 and ``batch``.
BATCH_WIRE_VERSION = 2
#: A body whose params are in the payload bucket: version 1 or 2 with ``paramsRef``
#: for ``params`` (:mod:`jobkit.payloads`); the runner resolves it to the body it stands for.
PAYLOAD_WIRE_VERSION = 3
#: The newest major version this reader reads.
NEWEST_WIRE_VERSION = PAYLOAD_WIRE_VERSION

#: JSON integers beyond this are not exact as floats (and a 400-digit one overflows one).
_MAX_SAFE_INTEGER = 2**53


TYPE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
#: The name of a field this reader does not know (a newer producer's optional one).
FIELD_NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
#: A priority lane's name (``priority``): the suffix of its queue's SQS name.
LANE_PATTERN = re.compile(r"^[a-z][a-z0-9]{0,15}$")
SIGNATURE_PATTERN = re.compile(r"^[0-9a-f]{40}$")
#: A domain is at most this many bytes of UTF-8: it is part of the jobs table's
#: sort keys, which DynamoDB limits to 1,024 bytes.
MAX_DOMAIN_BYTES = 255

#: A lone UTF-16 surrogate can only reach a body as a ``\ud800``-style JSON escape
#: (SQS carries valid Unicode only) or, in a hand-built event, as the raw code
#: point. This finds bodies that may hold one, so only those get the full check.
MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
#: A character SQS refuses in a message body or a string attribute value: it
#: takes #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF only
#: (SendMessage), and refuses the whole message otherwise. Written as the
#: characters it refuses (the same set, every code point checked): the negated
#: class costs 3 ms to compile, at every runner's cold start.
NOT_SQS_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def sqs_json(body: str) -> str:
    """JSON text as SQS takes it. ``json.dumps`` escapes the control characters;
    what SQS still refuses (U+FFFE, U+FFFF) can only stand inside a JSON string
    there, so it becomes its ``\\u`` escape: the same string to every reader."""
    if NOT_SQS_TEXT.search(body) is None:
        return body
    return NOT_SQS_TEXT.sub(lambda found: f"\\u{ord(found.group()):04x}", body)


_FIELDS = {
    "v",
    "id",
    "type",
    "domain",
    "params",
    "enqueuedAt",
    "releaseAt",
    "removeDuplicates",
    "removeDuplicatesIgnoreParams",
    "priorAttempts",
    "batch",
    "chain",
    "priority",
}
_REQUIRED = ("v", "id", "type", "params", "enqueuedAt")
#: The fields v1 and v2 name: jobkit's own. Any other is a newer producer's optional one.
KNOWN_FIELDS = frozenset(_FIELDS)


def decode(body: str | bytes) -> Any:
    """The decoded JSON of a body, refusing what JSON readers disagree on.

    Raises:
        SpecError: not JSON (NaN and Infinity are not JSON either), nested too
            deeply to parse, a key twice in one object, or a lone surrogate.
    """
    try:
        if isinstance(body, bytes | bytearray):  # as json.loads reads bytes
            body = body.decode(json.detect_encoding(body), "surrogatepass")
        data = _DECODER.decode(body)
    except RecursionError as exc:  # e.g. 10,000 nested arrays: json's C parser recurses
        raise SpecError("message body nests too deeply to parse") from exc
    except _DuplicateKey as exc:
        raise SpecError(
            f"message body has the key {short(exc.key)} twice in one object: JSON parsers disagree on which"
            " one counts, so the body is ambiguous"
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(f"message body is not valid JSON: {str(exc)[:200]}") from exc
    # (an ASCII body without an escape holds no surrogate: two C-speed tests spare most bodies the search)
    if (not body.isascii() or "\\u" in body) and MAYBE_SURROGATE.search(body):
        _check_unicode(data)
    return data


def _decoder() -> json.JSONDecoder:
    """One decoder for every body: ``json.loads`` with these hooks would build
    a decoder and its scanner per message, which costs more than the parse."""
    return json.JSONDecoder(
        parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_object_without_duplicates
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    """A JSON number too large for a double (``1e400``) would become infinity,
    which no JSON writer can send on: refused like ``Infinity``."""
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return data


_DECODER = _decoder()


def _check_unicode(data: Any) -> None:
    """Reject decoded text with a lone surrogate (from a ``\\ud800`` escape): it
    cannot be hashed, stored in DynamoDB or sent to SQS again."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except RecursionError as exc:
        raise SpecError("message body nests too deeply to parse") from exc
    except UnicodeEncodeError as exc:
        raise SpecError(
            "message body holds a lone UTF-16 surrogate (a \\ud800-style escape without its pair):"
            " not valid Unicode text"
        ) from exc


def valid_domain(domain: str) -> bool:
    return 0 < len(domain.encode("utf-8", "surrogatepass")) <= MAX_DOMAIN_BYTES


def short(value: Any, limit: int = 100) -> str:
    """A bounded repr for error messages: a bad field may hold a megabyte."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):  # a 400-digit integer is valid JSON, but no float, and no time
        return -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER
    return isinstance(value, float) and math.isfinite(value)


#: An RFC 3339 time in UTC, as a producer that can only fill in text gives one
#: (EventBridge Scheduler's ``<aws.scheduler.scheduled-time>``: ``2026-11-22T03:00:00Z``).
UTC_TIME_PATTERN = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$")


def utc_time(value: Any) -> float | None:
    """``value`` as epoch seconds, if it is an RFC 3339 UTC time; else None."""
    if not isinstance(value, str) or not UTC_TIME_PATTERN.fullmatch(value):
        return None
    from datetime import UTC, datetime

    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:  # 2026-02-30T00:00:00Z matches the pattern, and is no time
        return None
    return at if at >= 0 else None  # before 1970: refused as a number would be


def _enqueued_at(value: Any) -> bool:
    return (is_number(value) and value >= 0) or utc_time(value) is not None


def _ignored_params(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, str) for p in value)


def _prior_attempts(value: Any) -> bool:
    return type(value) is int and 0 <= value <= _MAX_SAFE_INTEGER


#: Each field's check, in the order a body is checked, and what it must be.
_FIELD_CHECKS: tuple[tuple[str, Callable[[dict[str, Any]], bool], str], ...] = (
    ("id", lambda d: isinstance(d["id"], str) and ID_PATTERN.fullmatch(d["id"]) is not None, ID_PATTERN.pattern),
    ("type", lambda d: isinstance(d["type"], str) and TYPE_PATTERN.fullmatch(d["type"]) is not None, "a job type name"),
    ("params", lambda d: isinstance(d["params"], dict), "an object"),
    (
        "enqueuedAt",
        lambda d: _enqueued_at(d["enqueuedAt"]),
        "epoch seconds, or an RFC 3339 UTC time like 2026-11-22T03:00:00Z",
    ),
    (
        "domain",
        lambda d: d.get("domain") is None or (isinstance(d["domain"], str) and valid_domain(d["domain"])),
        f"null or a non-empty string of at most {MAX_DOMAIN_BYTES} bytes in UTF-8",
    ),
    ("releaseAt", lambda d: d.get("releaseAt") is None or is_number(d["releaseAt"]), "null or epoch seconds"),
    ("removeDuplicates", lambda d: isinstance(d.get("removeDuplicates", False), bool), "a boolean"),
    (
        "removeDuplicatesIgnoreParams",
        lambda d: _ignored_params(d.get("removeDuplicatesIgnoreParams", [])),
        "a list of strings",
    ),
    ("priorAttempts", lambda d: _prior_attempts(d.get("priorAttempts", 0)), "a non-negative integer"),
)


def validate(data: Any) -> None:
    """Check a decoded body against the v1 schema (docs/job-spec.schema.json)."""
    if not isinstance(data, dict):
        raise SpecError(f"message body must be a JSON object, got {type(data).__name__}")
    version = data.get("v")
    if isinstance(version, int) and not isinstance(version, bool) and version > NEWEST_WIRE_VERSION:
        raise SpecError(
            f"wire version {version} is newer than this runner reads (v{NEWEST_WIRE_VERSION}):"
            " deploy a jobkit that reads it before producers send it, then redrive"
        )
    if version == PAYLOAD_WIRE_VERSION and type(version) is int:
        raise SpecError(
            "a v3 body's params are in the payload bucket ('paramsRef'): read it with jobkit.payloads,"
            " which fetches them"
        )
    if version not in (WIRE_VERSION, BATCH_WIRE_VERSION) or type(version) is not int:  # not true, not 1.0
        raise SpecError(
            f"unsupported wire version {short(version)} (this runner reads v{WIRE_VERSION} to v{NEWEST_WIRE_VERSION})"
        )
    if ("batch" in data) != (version == BATCH_WIRE_VERSION):
        raise SpecError(
            "field 'batch' needs wire version 2, and version 2 is a batch member's: a runner that reads"
            " only v1 would run the member without counting it"
        )
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        raise SpecError(f"message is missing required field(s): {', '.join(missing)}")
    # A field this reader does not know is a newer producer's optional one: ignored, kept in the body.
    misnamed = sorted(name for name in set(data) - _FIELDS if not FIELD_NAME_PATTERN.fullmatch(name))
    if misnamed:
        raise SpecError(f"message has field name(s) that are not identifiers: {short(', '.join(misnamed))}")
    for field, ok, expected in _FIELD_CHECKS:
        if not ok(data):
            value = data.get(field)
            # Params are only ever logged at DEBUG: name the type of a bad one, never its content.
            got = type(value).__name__ if field == "params" else short(value)
            raise SpecError(f"field {field!r} must be {expected}, got {got}")
    if "batch" in data:
        batch_id(data["batch"])
    if "chain" in data:
        if "batch" not in data:
            raise SpecError("field 'chain' is a chain step's, and a step's jobs are its batch's: it needs 'batch'")
        chain_link(data["chain"])
    validate_root_params(data["params"])


def is_reference(data: Any) -> bool:
    """Whether a decoded body is of wire version 3: its params in the payload
    bucket (:mod:`jobkit.payloads.reference` reads it)."""
    return isinstance(data, dict) and type(data.get("v")) is int and data["v"] == PAYLOAD_WIRE_VERSION


def priority_of(data: Mapping[str, Any]) -> str | None:
    """A body's ``priority``, if it is a lane's name. It only routes (a job's lane
    is the queue it is in): a reader ignores any other value rather than refuse
    the job, as it would ignore a field it does not know. Producers' tools
    (push, the push endpoint) refuse one (:func:`check_priority`)."""
    value = data.get("priority")
    return value if is_lane_name(value) else None


def is_lane_name(value: Any) -> bool:
    """Whether ``value`` is a priority lane's name (:data:`LANE_PATTERN`)."""
    return isinstance(value, str) and LANE_PATTERN.fullmatch(value) is not None


def check_priority(value: Any) -> None:
    """Refuse a ``priority`` that is neither null nor a lane's name (a producer's mistake)."""
    if value is not None and not is_lane_name(value):
        raise SpecError(f"field 'priority' must be null or a priority lane's name matching {LANE_PATTERN.pattern}")


def batch_id(value: Any) -> str:
    """The batch ID of a body's ``batch`` field: ``{"id": "..."}``."""
    if not (isinstance(value, dict) and isinstance(value.get("id"), str) and ID_PATTERN.fullmatch(value["id"])):
        raise SpecError(
            f"field 'batch' must be an object with an 'id' matching {ID_PATTERN.pattern}, got {short(value)}"
        )
    unknown = sorted(name for name in value if name != "id" and not FIELD_NAME_PATTERN.fullmatch(name))
    if unknown:
        raise SpecError(f"field 'batch' has key(s) that are not identifiers: {short(', '.join(unknown))}")
    return str(value["id"])


def chain_link(value: Any) -> ChainLink:
    """A body's ``chain`` field: ``{"id": "...", "step": 2, "previousResult": ...}``."""
    from jobkit.core.chain_link import MAX_STEPS, ChainLink

    if not (isinstance(value, dict) and isinstance(value.get("id"), str) and ID_PATTERN.fullmatch(value["id"])):
        raise SpecError(
            f"field 'chain' must be an object with an 'id' matching {ID_PATTERN.pattern}, got {short(value)}"
        )
    step = value.get("step")
    if type(step) is not int or not 1 <= step <= MAX_STEPS:
        raise SpecError(f"field 'chain' must have a 'step' from 1 to {MAX_STEPS}, got {short(step)}")
    unknown = sorted(name for name in value if not FIELD_NAME_PATTERN.fullmatch(name))
    if unknown:
        raise SpecError(f"field 'chain' has key(s) that are not identifiers: {short(', '.join(unknown))}")
    return ChainLink(value["id"], step, value.get("previousResult"))


def validate_root_params(params: dict[str, Any]) -> None:
    """A root job's signature and timestamp come together, or not at all: a leaf
    with half of them could be neither superseded nor told apart from a plain job."""
    if "rootJobSignature" not in params and "rootJobTimestamp" not in params:
        is_self = params.get("rootJobIsSelf")
        if is_self is not None and not isinstance(is_self, bool):
            raise SpecError(f"params.rootJobIsSelf must be a boolean, got {short(is_self)}")
        return
    signature = params.get("rootJobSignature")
    if not (isinstance(signature, str) and SIGNATURE_PATTERN.fullmatch(signature)):
        raise SpecError(
            f"params.rootJobSignature must be 40 lowercase hex digits next to params.rootJobTimestamp,"
            f" got {short(signature)}"
        )
    timestamp: Any = params.get("rootJobTimestamp")
    if not (is_number(timestamp) and timestamp >= 0):
        raise SpecError(
            f"params.rootJobTimestamp must be epoch seconds next to params.rootJobSignature, got {short(timestamp)}"
        )
    is_self = params.get("rootJobIsSelf")
    if is_self is not None and not isinstance(is_self, bool):
        raise SpecError(f"params.rootJobIsSelf must be a boolean, got {short(is_self)}")


def check_extra_fields(job: str, fields: Mapping[str, Any]) -> None:
    """A kept field is a newer producer's: never a field jobkit reads or writes
    itself (a second ``id``, a ``v``, the runners' ``priorAttempts``), and a name
    a body may have (docs/wire-format.md: an identifier)."""
    for name in fields:
        if not isinstance(name, str) or name in KNOWN_FIELDS or not FIELD_NAME_PATTERN.fullmatch(name):
            reason = "is jobkit's own field" if name in KNOWN_FIELDS else "is not an identifier"
            raise SpecError(f"{job}: extra field {short(name)} {reason}: a kept field is one jobkit does not know")
