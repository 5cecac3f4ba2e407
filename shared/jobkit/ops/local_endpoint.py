"""Is an endpoint ``jobkit local up``? The local stack says so at
``GET {endpoint}/jobkit/local``, with its region and its dummy credentials,
so ``--endpoint-url`` (or ``$AWS_ENDPOINT_URL``) alone reaches it: the ops
commands take the stack's region (unless ``--region`` names one) and its
credentials (unless ``$AWS_ACCESS_KEY_ID`` is set).

One short GET, only when an endpoint is given; an endpoint that is not the
local stack (another emulator, a VPC endpoint) answers something else, and
nothing changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PATH = "/jobkit/local"
#: What the answer's ``service`` field says.
SERVICE = "jobkit local stack"
TIMEOUT_S = 2.0


@dataclass(frozen=True)
class LocalStackIdentity:
    region: str
    access_key_id: str
    secret_access_key: str

    def to_json(self) -> dict[str, str]:
        return {
            "service": SERVICE,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
        }


def identify(endpoint_url: str, timeout_s: float = TIMEOUT_S) -> LocalStackIdentity | None:
    """The local stack's identity, if ``endpoint_url`` is one; else ``None``."""
    import urllib.error
    import urllib.request

    if not endpoint_url.startswith(("http://", "https://")):
        return None
    try:
        with urllib.request.urlopen(endpoint_url.rstrip("/") + PATH, timeout=timeout_s) as response:
            answer = json.loads(response.read(4096))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    if not isinstance(answer, dict) or answer.get("service") != SERVICE:
        return None
    try:
        return LocalStackIdentity(str(answer["region"]), str(answer["access_key_id"]), str(answer["secret_access_key"]))
    except KeyError:
        return None
