"""``[push_endpoint]`` in jobs.toml: the HTTP push endpoint, opt-in.

::

    [push_endpoint]
    types = ["refreshLinks", "htmlCacheUpdate"]   # which types it takes (default: every type)
    auth = "iam"                                  # or "hmac"
    hmac_secret = "myapp/jobkit-push"             # with auth = "hmac": a Secrets Manager secret

``auth = "iam"`` (the default) is a Lambda function URL with IAM auth: a
request must be signed with SigV4 by a principal the stack's producer policy
allows. ``auth = "hmac"`` is for producers that cannot sign SigV4: the function
URL takes any request, and the endpoint refuses one that does not carry an
HMAC-SHA256 of its body made with the secret's key (see
:mod:`jobkit.endpoint.signature`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobkit.core.errors import ConfigError

AUTH_MODES = ("iam", "hmac")
#: A Secrets Manager secret's name or ARN.
SECRET_PATTERN = re.compile(r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:)?[A-Za-z0-9/_+=.@-]{1,512}$")


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """The declared push endpoint.

    Attributes:
        types: the job types it takes.
        auth: ``"iam"`` or ``"hmac"``.
        hmac_secret: the Secrets Manager secret (name or ARN) that holds the HMAC key.
    """

    types: tuple[str, ...]
    auth: str = "iam"
    hmac_secret: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"types": list(self.types), "auth": self.auth}
        if self.hmac_secret is not None:
            out["hmac_secret"] = self.hmac_secret
        return out


def parse_endpoint(source: str, raw: Any, types: Mapping[str, Any]) -> EndpointOptions | None:
    """The ``[push_endpoint]`` table, or ``None`` when it is not declared."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError(source, "push_endpoint", f"must be a table, got {type(raw).__name__}")
    for name in raw:
        if name not in {"types", "auth", "hmac_secret"}:
            raise ConfigError(source, f"push_endpoint.{name}", "unknown key (allowed: auth, hmac_secret, types)")
    taken = raw.get("types", sorted(types))
    if not isinstance(taken, list) or not taken or not all(isinstance(t, str) for t in taken):
        raise ConfigError(source, "push_endpoint.types", f"must be a non-empty list of job type names, got {taken!r}")
    for name in taken:
        if name not in types:
            raise ConfigError(source, "push_endpoint.types", f"names undeclared type {name!r}")
    auth = raw.get("auth", "iam")
    if auth not in AUTH_MODES:
        raise ConfigError(source, "push_endpoint.auth", f"must be one of {', '.join(AUTH_MODES)}, got {auth!r}")
    secret, key = raw.get("hmac_secret"), "push_endpoint.hmac_secret"
    if auth == "hmac" and secret is None:
        raise ConfigError(source, key, 'is required with auth = "hmac": a Secrets Manager secret')
    if auth != "hmac" and secret is not None:
        raise ConfigError(source, key, 'is used only with auth = "hmac"')
    if secret is not None and not (isinstance(secret, str) and SECRET_PATTERN.fullmatch(secret)):
        raise ConfigError(source, key, f"must be a Secrets Manager secret name or ARN, got {secret!r}")
    return EndpointOptions(tuple(dict.fromkeys(taken)), auth, secret)
