"""The reference to a job's params in the payload bucket, and the two forms of
a body that carries one.

A body of wire version 3 is version 1 (or 2, with ``batch``) with ``params``
replaced by ``paramsRef``: the key of the object that holds the params' JSON,
its size in bytes and its SHA-256. A runner that reads v3 fetches the object,
checks both, and puts the params back where they were (:func:`resolved`):
from there the job is the inline job it would have been, for the params'
schema, de-duplication, supersession and the job itself. A runner that does
not read v3 refuses the body as poison (a newer wire version), so no job ever
runs without its params.

The key names the job and the push:
``params/{type}/{domain}/{id}/{sha256}.{push}.json``, where ``{push}`` is 16
hex digits new for each upload, so two pushes of one job (a retried request,
a parent's retry) never share an object, and one's end cannot remove what the
other still needs. A runner reads only its own types' prefix, and a reference
must name exactly its body's type, domain, job ID and hash: one job's body
cannot point at another job's params. When the job has ended, its runner
writes ``{sha256}.{push}.ended`` beside the object and removes the object
(:mod:`jobkit.runner.stages.payload_done`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from jobkit.core.errors import SpecError
from jobkit.core.wire import BATCH_WIRE_VERSION, PAYLOAD_WIRE_VERSION, WIRE_VERSION, decode, short, validate_root_params

#: The body field that holds the reference.
REFERENCE_FIELD = "paramsRef"
#: Every params object's key begins so (the bucket may hold other things one day).
KEY_PREFIX = "params/"
#: The largest params a job may have in the bucket: a runner holds them in memory.
MAX_PARAMS_BYTES = 32 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: What follows ``{sha256}.`` in a params object's key: the push's own 16 hex digits.
_PUSH_AND_SUFFIX = re.compile(r"^[0-9a-f]{16}\.json$")


@dataclass(frozen=True)
class ParamsRef:
    """Where a job's params are: the object's key, its size in bytes and its SHA-256 (hex)."""

    key: str
    size: int
    sha256: str

    def to_wire(self) -> dict[str, Any]:
        return {"key": self.key, "size": self.size, "sha256": self.sha256}


def params_bytes(params: Any) -> bytes:
    """The params as the object holds them: compact JSON in UTF-8, as a body would hold them."""
    return json.dumps(params, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def params_from(data: bytes, ref: ParamsRef) -> dict[str, Any]:
    """A params object's params: UTF-8 JSON of an object, checked as a body's
    params are (no duplicate key, no NaN, no lone surrogate, root params whole).

    Raises:
        SpecError: naming the object.
    """
    try:
        params = decode(data.decode("utf-8"))
        if not isinstance(params, dict):
            raise SpecError(f"it holds a JSON {type(params).__name__}, not an object")
        validate_root_params(params)
    except UnicodeDecodeError as exc:
        raise SpecError(f"its params object {ref.key} is not UTF-8 text: {exc.reason}") from exc
    except SpecError as exc:
        raise SpecError(f"its params object {ref.key}: {str(exc).replace('message body', 'the object')}") from exc
    return params


def type_prefix(job_type: str) -> str:
    """The prefix of every params object of a type (what a runner may read)."""
    return f"{KEY_PREFIX}{job_type}/"


def job_prefix(job_type: str, domain: str | None, job_id: str) -> str:
    """The prefix of every params object of one job. The domain is percent-encoded
    after a ``=`` (``-`` for none), so no domain's key is another's."""
    where = "-" if domain is None else "=" + quote(domain, safe="")
    return f"{type_prefix(job_type)}{where}/{job_id}/"


def params_key(job_type: str, domain: str | None, job_id: str, sha256: str, push: str) -> str:
    """The key of a job's params object, for the push ``push`` (16 hex digits)."""
    return f"{job_prefix(job_type, domain, job_id)}{sha256}.{push}.json"


def ended_key(ref: ParamsRef) -> str:
    """Where a runner marks that the job of ``ref`` ended (beside the object, which it then removes)."""
    return ref.key.removesuffix(".json") + ".ended"


def reference_for(job_type: str, domain: str | None, job_id: str, data: bytes) -> ParamsRef:
    """A new push's reference to ``data``: its own key."""
    digest = hashlib.sha256(data).hexdigest()
    return ParamsRef(params_key(job_type, domain, job_id, digest, os.urandom(8).hex()), len(data), digest)


def reference_of(data: dict[str, Any]) -> ParamsRef:
    """A v3 body's reference, checked: its shape, and that it names this body's
    own job (type, domain, ID).

    Raises:
        SpecError: not a reference a runner may follow (poison).
    """
    if "params" in data:
        raise SpecError("a v3 body carries its params in the payload bucket: 'params' and 'paramsRef' both given")
    value = data.get(REFERENCE_FIELD)
    if not isinstance(value, dict) or set(value) - {"key", "size", "sha256"} or len(value) != 3:
        raise SpecError(f"field 'paramsRef' must be an object of 'key', 'size' and 'sha256', got {short(value)}")
    key, size, digest = value["key"], value["size"], value["sha256"]
    if type(size) is not int or not 0 <= size <= MAX_PARAMS_BYTES:
        raise SpecError(f"paramsRef.size must be a byte count from 0 to {MAX_PARAMS_BYTES}, got {short(size)}")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise SpecError(f"paramsRef.sha256 must be 64 lowercase hex digits, got {short(digest)}")
    job_type, domain, job_id = data.get("type"), data.get("domain"), data.get("id")
    if not (isinstance(job_type, str) and isinstance(job_id, str) and (domain is None or isinstance(domain, str))):
        raise SpecError("a v3 body needs its 'type' and 'id' (and a 'domain' that is text or null)")
    expected = f"{job_prefix(job_type, domain, job_id)}{digest}."
    if not (isinstance(key, str) and key.startswith(expected) and _PUSH_AND_SUFFIX.fullmatch(key[len(expected) :])):
        raise SpecError(
            f"paramsRef.key must be the job's own key {short(expected + '{16 hex digits}.json')}, got {short(key)}"
        )
    return ParamsRef(key, size, digest)


def resolved(data: dict[str, Any], params: Any) -> dict[str, Any]:
    """A v3 body with its params put back: the v1 (or v2, with ``batch``) body
    it stands for, which the runner reads as any other."""
    body = {name: value for name, value in data.items() if name != REFERENCE_FIELD}
    body["v"] = BATCH_WIRE_VERSION if "batch" in data else WIRE_VERSION
    body["params"] = params
    return body


def reference_body(inline: dict[str, Any], ref: ParamsRef) -> dict[str, Any]:
    """A v1 or v2 body (``JobSpecification.to_dict``) as the v3 body that stands for it."""
    body = {name: value for name, value in inline.items() if name != "params"}
    body["v"] = PAYLOAD_WIRE_VERSION
    body[REFERENCE_FIELD] = ref.to_wire()
    return body
