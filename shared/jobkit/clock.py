"""Time, injected.

Everything in jobkit that asks "what time is it?" asks a :class:`Clock`, so
tests and the local stack can move time forward instead of sleeping through
a backoff or a two-hour delay. Times are UTC epoch seconds as floats
(sub-second precision), the same unit the wire format uses.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Current UTC time in epoch seconds."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """A clock that can jump forward.

    A *flowing* virtual clock is real time plus an offset: work takes the time
    it really takes, but idle waits (a visibility backoff, a delayed job) can
    be skipped with :meth:`advance`. A frozen one only moves when told to,
    which makes pickup delays exact in tests.
    """

    def __init__(self, start: float | None = None, *, flowing: bool = False) -> None:
        self._lock = threading.Lock()
        self._flowing = flowing
        base = time.time() if start is None else start
        self._offset = base - time.time() if flowing else 0.0
        self._frozen_at = base

    def now(self) -> float:
        with self._lock:
            if self._flowing:
                return time.time() + self._offset
            return self._frozen_at

    @property
    def flowing(self) -> bool:
        return self._flowing

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._offset += seconds
            self._frozen_at += seconds

    def advance_to(self, when: float) -> None:
        """Move to ``when`` if that is in the future; never move back."""
        delta = when - self.now()
        if delta > 0:
            self.advance(delta)
