"""moto on a virtual clock: the times moto reads are the clock's."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from jobkit.core.clock import VirtualClock


@contextlib.contextmanager
def moto_on_clock(clock: VirtualClock) -> Iterator[None]:
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
