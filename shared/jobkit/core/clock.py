"""Time, injected.

Everything in jobkit that asks "what time is it?" asks a :class:`Clock`, so
tests and the local stack can move time forward instead of sleeping through
a backoff or a two-hour delay. Times are UTC epoch seconds as floats
(sub-second precision), the same unit the wire format uses.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Alarm(Protocol):
    def cancel(self) -> None:
        """Stop the alarm if it has not gone off yet."""
        ...


class Clock(Protocol):
    def now(self) -> float:
        """Current UTC time in epoch seconds."""
        ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Alarm:
        """Call ``callback`` once the clock reaches ``when`` (in another thread on
        the real clock; in the thread that moves a virtual clock past it)."""
        ...


class _Entry:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _fire(entry: _Entry) -> None:
    try:
        entry.callback()
    except Exception:  # an alarm never takes its clock down
        log.exception("an alarm callback failed")


class SystemClock:
    """The real clock. Alarms run on one daemon thread, started on first use,
    so arming one per job costs a heap push, not a thread."""

    def __init__(self) -> None:
        self._alarms: list[tuple[float, int, _Entry]] = []
        self._counter = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def now(self) -> float:
        return time.time()

    def call_at(self, when: float, callback: Callable[[], object]) -> Alarm:
        entry = _Entry(when, callback)
        with self._wake:
            heapq.heappush(self._alarms, (when, next(self._counter), entry))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="jobkit-alarms", daemon=True)
                self._thread.start()
            if self._alarms[0][2] is entry:  # the thread sleeps until the earliest: wake it only for a new earliest
                self._wake.notify()
        return entry

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._alarms and self._alarms[0][2].cancelled:
                    heapq.heappop(self._alarms)
                if not self._alarms:
                    self._wake.wait()
                    continue
                delay = self._alarms[0][0] - time.time()
                if delay > 0:
                    self._wake.wait(delay)
                    continue
                entry = heapq.heappop(self._alarms)[2]
            if not entry.cancelled:
                _fire(entry)


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
        self._alarms: list[_Entry] = []
        self._real: SystemClock | None = None

    def now(self) -> float:
        with self._lock:
            if self._flowing:
                return time.time() + self._offset
            return self._frozen_at

    @property
    def flowing(self) -> bool:
        return self._flowing

    def call_at(self, when: float, callback: Callable[[], object]) -> Alarm:
        """An alarm that goes off when :meth:`advance` passes ``when``, in the
        advancing thread (so a test that moves time past a deadline sees what the
        alarm did at once); on a flowing clock, also when real time gets there."""
        entry = _Entry(when, callback)
        with self._lock:
            self._alarms.append(entry)
        if self._flowing:
            if self._real is None:
                self._real = SystemClock()
            self._real.call_at(when - self._offset, lambda: self._ring(entry))
        return entry

    def _ring(self, entry: _Entry) -> None:
        with self._lock:
            if entry not in self._alarms:
                return
            self._alarms.remove(entry)
        if not entry.cancelled:
            _fire(entry)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._offset += seconds
            self._frozen_at += seconds
            now = time.time() + self._offset if self._flowing else self._frozen_at
            due = sorted((e for e in self._alarms if e.when <= now and not e.cancelled), key=lambda e: e.when)
            self._alarms = [e for e in self._alarms if e.when > now and not e.cancelled]
        for entry in due:
            _fire(entry)

    def advance_to(self, when: float) -> None:
        """Move to ``when`` if that is in the future; never move back."""
        delta = when - self.now()
        if delta > 0:
            self.advance(delta)
