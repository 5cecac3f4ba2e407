"""Is an endpoint ``jobkit local up``? The local stack says so at
``GET {endpoint}/jobkit/local``, with its region, its dummy credentials and
its clock, so ``--endpoint-url`` (or ``$AWS_ENDPOINT_URL``) alone reaches it:
the ops commands take the stack's region (unless ``--region`` names one), its
credentials (unless ``$AWS_ACCESS_KEY_ID`` is set) and its time (which
``jobkit local advance`` may have moved ahead of the wall clock).

One short GET, only when an endpoint is given; an endpoint that is not the
local stack (another emulator, a VPC endpoint) answers something else, and
nothing changes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from jobkit.core.errors import JobKitError

PATH = "/jobkit/local"
ADVANCE_PATH = PATH + "/advance"
#: What the answer's ``service`` field says.
SERVICE = "jobkit local stack"
TIMEOUT_S = 2.0
#: The furthest one advance moves the clock: past SQS's longest retention (14 days) with room.
MAX_ADVANCE_S = 30 * 86_400
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([dhms]?)")
_UNIT_S = {"d": 86_400, "h": 3_600, "m": 60, "s": 1, "": 1}


@dataclass(frozen=True)
class LocalStackIdentity:
    region: str
    access_key_id: str
    secret_access_key: str
    now: float | None = None  # the stack's clock, when it answered

    def to_json(self) -> dict[str, object]:
        return {
            "service": SERVICE,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "now": self.now,
        }


def identify(endpoint_url: str, timeout_s: float = TIMEOUT_S) -> LocalStackIdentity | None:
    """The local stack's identity, if ``endpoint_url`` is one; else ``None``."""
    answer = _request(endpoint_url, PATH, None, timeout_s)
    if not isinstance(answer, dict) or answer.get("service") != SERVICE:
        return None
    fields = [answer.get(name) for name in ("region", "access_key_id", "secret_access_key")]
    if not all(isinstance(value, str) and value.strip() for value in fields):
        return None
    now = answer.get("now")
    region, key, secret = (str(value).strip() for value in fields)
    return LocalStackIdentity(region, key, secret, float(now) if isinstance(now, int | float) else None)


class NotLocalStack(JobKitError):
    """The endpoint is not a ``jobkit local up`` whose clock can move."""


#: How long an advance may wait: the stack moves its clock once the jobs running now have finished.
ADVANCE_TIMEOUT_S = 900.0


def advance(endpoint_url: str, seconds: float, timeout_s: float = ADVANCE_TIMEOUT_S) -> float:
    """Move the local stack's clock ``seconds`` forward; returns its time now.

    Raises:
        NotLocalStack: nothing at ``endpoint_url`` answers as ``jobkit local up``.
    """
    if identify(endpoint_url) is None:
        raise NotLocalStack(f"{endpoint_url} is not a jobkit local up (is it running? --endpoint-url)")
    answer = _request(endpoint_url, ADVANCE_PATH, {"seconds": seconds}, timeout_s)
    if not isinstance(answer, dict) or not isinstance(answer.get("now"), int | float):
        raise NotLocalStack(f"{endpoint_url} did not move its clock: {answer!r}")
    return float(answer["now"])


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` as seconds (more than 0, at most 30 days).

    Raises:
        ValueError: what is wrong with it.
    """
    compact = text.strip().lower().replace(" ", "")
    parts = _DURATION.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(f"{text!r} is not a duration: e.g. 90s, 15m, 2h, 1d or 1h30m")
    seconds = sum(float(number) * _UNIT_S[unit] for number, unit in parts)
    if not 0 < seconds <= MAX_ADVANCE_S:
        raise ValueError(f"{text!r}: a local clock moves forward by more than 0 and at most 30 days")
    return seconds


def _request(endpoint_url: str, path: str, body: dict[str, object] | None, timeout_s: float) -> object:
    """The JSON answer, or ``None``: no answer within ``timeout_s`` in all (a
    trickling server too), a redirect, an error status, or not JSON."""
    import threading
    import urllib.request

    if not endpoint_url.lower().startswith(("http://", "https://")):
        return None
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(endpoint_url.rstrip("/") + path, data=data, method="POST" if data else "GET")

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None  # the local stack never redirects: a 3xx is not it

    opener = urllib.request.build_opener(NoRedirects)
    answer: list[object] = []

    def ask() -> None:
        try:
            with opener.open(request, timeout=timeout_s) as response:
                answer.append(json.loads(response.read(4096)))
        except Exception:  # any failure means "not the local stack"
            return

    asking = threading.Thread(target=ask, name="jobkit-local-probe", daemon=True)
    asking.start()
    asking.join(timeout_s)
    return answer[0] if answer else None
