"""The producer signature of ``auth = "hmac"``: an HMAC-SHA256 of the request, for producers that cannot sign SigV4.

A request carries the header::

    X-Jobkit-Signature: t=1795305600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd

where ``t`` is the time of signing (UTC epoch seconds, an integer) and ``v1``
is the lowercase hex HMAC-SHA256, keyed with the secret's key (its
``SecretString``, as UTF-8 bytes), of ``f"{t}.{body}"``: the time, a dot, and
the request body's bytes exactly as sent. A GET (a job's status) has no body: it is
signed over its raw query string instead, ``f"{t}.{raw_query_string}"``, the
bytes after the ``?`` exactly as sent (percent-encoding and all, without the
``?``). A signature more than
:data:`MAX_AGE_S` away from the endpoint's clock is refused, so a captured
request cannot be replayed later. (As Stripe's and Slack's webhooks sign.)
"""

from __future__ import annotations

import hashlib
import hmac
import re

HEADER = "x-jobkit-signature"
MAX_AGE_S = 300
#: A shorter key (an empty secret, say) would let anyone sign: the endpoint takes no request then.
MIN_KEY_BYTES = 16
_FORMAT = re.compile(r"^t=(\d{1,12}),v1=([0-9a-f]{64})$")


class SignatureRefused(Exception):
    """The request's producer signature is missing, malformed, stale or wrong."""


class KeyUnusable(Exception):
    """The endpoint's own key cannot be used: no request is taken until it is fixed."""


def usable_key(key: bytes) -> bytes:
    """``key``, if it is long enough to sign with (:data:`MIN_KEY_BYTES`)."""
    if len(key) < MIN_KEY_BYTES:
        raise KeyUnusable(f"the producers' key is {len(key)} bytes; it must be at least {MIN_KEY_BYTES}")
    return key


def sign(key: bytes, body: bytes, now: float) -> str:
    """The header value for ``body`` (or a GET's raw query string) signed at ``now``."""
    timestamp = int(now)
    digest = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(key: bytes, body: bytes, header: str | None, now: float, *, what: str = "body") -> None:
    """Raise :class:`SignatureRefused` unless ``header`` signs ``body`` with ``key``, within
    :data:`MAX_AGE_S`. ``what`` names what was signed in the refusal (a GET's "query string")."""
    if not header:
        raise SignatureRefused(f"no X-Jobkit-Signature header: sign the {what} (see docs/push-endpoint.md)")
    match = _FORMAT.fullmatch(header.strip())
    if match is None:
        raise SignatureRefused(
            "X-Jobkit-Signature must be t=<epoch seconds>,v1=<64 lower-case hex digits>, no space after the comma"
        )
    timestamp = int(match.group(1))
    if abs(now - timestamp) > MAX_AGE_S:
        raise SignatureRefused(f"the signature's time is more than {MAX_AGE_S} s from the endpoint's clock")
    expected = hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, match.group(2)):
        raise SignatureRefused(f"the signature does not match the {what}")
