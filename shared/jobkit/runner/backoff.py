"""Retry delays: exponential backoff with jitter."""

from __future__ import annotations

import math
import random

from jobkit.declaration.type_options import Backoff
from jobkit.sqs import MAX_VISIBILITY_S


def retry_delay_s(backoff: Backoff, attempt: int, rng: random.Random) -> int:
    """Seconds to hide a message after its ``attempt``-th failure (1-based).

    The nominal delay is ``min(cap, base * factor**(attempt-1))``; the fraction
    ``jitter`` of it is drawn at random, the rest is fixed. Rounded up to whole
    seconds, as SQS visibility timeouts are.
    """
    nominal = min(backoff.cap_s, backoff.base_s * backoff.factor ** max(0, attempt - 1))
    fixed = nominal * (1 - backoff.jitter)
    delay = fixed + rng.uniform(0, nominal - fixed)
    return min(MAX_VISIBILITY_S, math.ceil(delay))
