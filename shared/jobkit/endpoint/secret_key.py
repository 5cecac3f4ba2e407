"""The producers' HMAC key of ``auth = "hmac"``: read from Secrets Manager, re-read every :data:`KEY_TTL_S`.

A re-read that fails (Secrets Manager throttled, down, or out of reach) does
not stop the endpoint: the key it read last serves on, with a warning, while
the re-read is tried again after :data:`REFRESH_RETRY_S`, then twice that,
and so on up to :data:`KEY_TTL_S`, so an outage is not asked again on every
request. A key serves so for at most :data:`MAX_KEY_AGE_S` after it was read:
a key that cannot be checked against its secret for that long is not used
(the endpoint answers 503), since a rotation may have retired it.

A re-read that succeeds is the secret's word, whatever it says: a rotated key
replaces the cached one at once, and a secret that no longer holds a usable
key (emptied, say, to stop every producer) ends the cached one at once too.
A key never read has nothing to serve with: each request reads it, and gets
503 while that fails.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from jobkit.core.clock import Clock
from jobkit.endpoint.signature import KeyUnusable, usable_key

log = logging.getLogger(__name__)

#: How long a key read from the secret is used before it is read again, so a rotated key is taken up.
KEY_TTL_S = 300.0
#: How long after it was read a key serves while its secret cannot be read: 1 hour, 12 re-read periods.
MAX_KEY_AGE_S = 3600.0
#: The wait after a failed re-read before the next one; it doubles with each failure, up to :data:`KEY_TTL_S`.
REFRESH_RETRY_S = 30.0


class SecretKey:
    """The HMAC key, from the secret's ``SecretString``, re-read every :data:`KEY_TTL_S` seconds.

    Args:
        client: a Secrets Manager client.
        secret_id: the secret's name or ARN.
        clock: what the key's age is counted on.
    """

    def __init__(self, client: Any, secret_id: str, clock: Clock) -> None:
        self._client = client
        self._secret_id = secret_id
        self._clock = clock
        self._key: bytes | None = None
        self._read_at = 0.0
        self._next_read_at = 0.0
        self._failures = 0
        self._last_error = ""
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        """The key to check signatures with.

        Raises:
            KeyUnusable: no key was ever read, the secret holds no usable one, or
                the last one read is older than :data:`MAX_KEY_AGE_S` and the
                secret still cannot be read.
        """
        with self._lock:
            now = self._clock.now()
            if self._key is None or now >= self._next_read_at:
                self._read(now)
            elif now - self._read_at > MAX_KEY_AGE_S:  # still backing off, and too old to use
                raise KeyUnusable(self._last_error)
            assert self._key is not None  # _read leaves a key, or raises
            return self._key

    def _read(self, now: float) -> None:
        try:
            value = self._client.get_secret_value(SecretId=self._secret_id).get("SecretString")
        except Exception as exc:  # botocore's errors: no access, no such secret, throttled
            self._read_failed(now, f"cannot read the secret {self._secret_id}: {exc}")
            return
        if not isinstance(value, str):
            self._key = None
            raise KeyUnusable(f"the secret {self._secret_id} has no SecretString (a binary secret?)")
        try:
            self._key = usable_key(value.encode("utf-8"))
        except KeyUnusable:
            self._key = None
            raise
        self._read_at, self._next_read_at, self._failures = now, now + KEY_TTL_S, 0

    def _read_failed(self, now: float, error: str) -> None:
        self._last_error = error
        if self._key is None:  # nothing to serve with: the next request reads again
            raise KeyUnusable(error)
        self._failures += 1
        # capped exponent: weeks of failures must not overflow a float
        self._next_read_at = now + min(KEY_TTL_S, REFRESH_RETRY_S * 2.0 ** min(self._failures - 1, 16))
        age = now - self._read_at
        if age > MAX_KEY_AGE_S:
            raise KeyUnusable(error)
        log.warning(
            "%s; the cached key, read %.0f s ago, serves until it is %.0f s old (next read in %.0f s)",
            error,
            age,
            MAX_KEY_AGE_S,
            self._next_read_at - now,
        )
