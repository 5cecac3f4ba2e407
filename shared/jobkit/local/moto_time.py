"""moto on a virtual clock, and when its next hidden message reappears.

Everything here reaches into moto's internals, so it is kept in one place:

- moto reads the time through ``moto.core.utils.utcnow`` (datetimes) and, in
  its SQS models, ``unix_time`` / ``unix_time_millis``; every visibility and
  delay decision goes through those. They are patched to read the clock.
- moto's SQS keeps a queue's messages in ``Queue._messages`` with their
  ``visible_at`` and ``delayed_until`` (milliseconds); that tells when the next
  one becomes receivable, so a drain can jump there instead of polling.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from jobkit.clock import VirtualClock


@contextlib.contextmanager
def moto_on_clock(clock: VirtualClock) -> Iterator[None]:
    import importlib

    moto_utils: Any = importlib.import_module("moto.core.utils")
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    originals = (moto_utils.utcnow, sqs_models.unix_time, sqs_models.unix_time_millis)
    unix_time, unix_time_millis = originals[1], originals[2]

    def fast_unix_time(dt: datetime | None = None) -> float:
        # SQS asks for the time once per message per scan: keep this cheap.
        return clock.now() if dt is None else unix_time(dt)

    def fast_unix_time_millis(dt: datetime | None = None) -> float:
        return clock.now() * 1000.0 if dt is None else unix_time_millis(dt)

    moto_utils.utcnow = lambda: datetime.fromtimestamp(clock.now(), UTC).replace(tzinfo=None)
    sqs_models.unix_time = fast_unix_time
    sqs_models.unix_time_millis = fast_unix_time_millis
    try:
        yield
    finally:
        moto_utils.utcnow, sqs_models.unix_time, sqs_models.unix_time_millis = originals


def next_visible_at(account_id: str, region: str, queue_names: Iterable[str], now: float) -> float | None:
    """When the next hidden or delayed message of these queues becomes receivable
    (epoch seconds), or None if none is waiting. Messages visible already are
    not waited for."""
    from moto.sqs.models import sqs_backends

    backend: Any = sqs_backends[account_id][region]
    times = []
    for name in queue_names:
        queue = backend.queues.get(name)
        for message in list(queue._messages) if queue else []:
            when = max(message.visible_at, message.delayed_until) / 1000
            if when >= now:
                times.append(when)
    return min(times) if times else None
