"""moto's SQS queues, indexed by what SQS asks of them (:class:`IndexedMessages`),
so that what SQS does per message costs the same however deep the queue is;
and what the index can tell at once (:func:`next_visible_at`, :func:`has_receivable`)."""

from __future__ import annotations

import contextlib
import heapq
import importlib
import itertools
import math
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from jobkit.local.fair_queues import Tenants


def next_visible_at(account_id: str, region: str, queue_names: Iterable[str], now: float) -> float | None:
    """When the next hidden or delayed message of these queues becomes receivable
    (epoch seconds), or None if none is waiting. Messages visible already are
    not waited for. Needs :func:`indexed_queues`."""
    from moto.sqs.models import sqs_backends

    backend: Any = sqs_backends[account_id][region]
    times = []
    for name in queue_names:
        queue = backend.queues.get(name)
        when = index_of(queue).next_receivable_at(now * 1000) if queue else None
        if when is not None:
            times.append(when / 1000)
    return min(times) if times else None


def has_receivable(account_id: str, region: str, queue_name: str, now: float) -> bool:
    """Whether a queue has a message that a receive would return now. Needs :func:`indexed_queues`."""
    from moto.sqs.models import sqs_backends

    queue: Any = sqs_backends[account_id][region].queues.get(queue_name)
    return queue is not None and index_of(queue).has_receivable(now * 1000)


class IndexedMessages:
    """A queue's messages in moto's order, indexed by what SQS asks of them.

    It stands in for moto's ``Queue._messages`` list (append, remove,
    iteration, ``len``), so moto's own code keeps working on it, and keeps at
    the time of moto's clock: which messages a receive would return
    (``now > visible_at`` and ``now >= delayed_until``, as moto decides),
    which are delayed and which in flight (not visible), heaps of when each
    hidden one comes back, and every receipt handle each message has had. A
    message's times change only through :class:`moto.sqs.models.Message`'s
    ``change_visibility``, ``delay`` and ``mark_received``, which
    :func:`indexed_queues` makes report to the message's index.

    Its answers are those of a scan of the whole queue at moto's clock, at a
    cost that does not grow with the queue; but for the order of a standard
    queue's messages that carry a ``MessageGroupId``, which it gives as an
    SQS fair queue would (:class:`~jobkit.local.fair_queues.Tenants`). Should the clock ever go back
    (more than :data:`_CLOCK_SLACK_MS`), it sorts every message again.
    """

    def __init__(self, messages: Iterable[Any] = ()) -> None:
        self._lock = threading.RLock()
        self._models: Any = importlib.import_module("moto.sqs.models")
        self._place: dict[Any, int] = {}  # message -> its place in the queue (growing, like moto's list order)
        self._at: dict[int, Any] = {}  # place -> message
        self._handles: dict[str, int] = {}  # every receipt handle a message here has had -> its place
        self._receivable: set[int] = set()
        self._delayed: set[int] = set()
        self._in_flight: set[int] = set()
        self._tenants = Tenants()  # the receivable places by MessageGroupId, to take as a fair queue does
        self._queued: set[int] = set()  # the places in the tenants' heaps
        self._in_flight_heap: list[tuple[float, int]] = []  # (visible_at, place)
        self._delayed_heap: list[tuple[float, int]] = []  # (delayed_until, place)
        self._wake_heap: list[tuple[float, int]] = []  # (when receivable, place) of hidden ones
        self._sorted_times: dict[int, tuple[float, float]] = {}  # place -> the times its heap entries are for
        self._places = itertools.count()
        self._now = -math.inf  # moto's clock (ms) when the sets were last brought up to date
        for message in messages:
            self.append(message)

    # -- moto's list ----------------------------------------------------------------

    def append(self, message: Any) -> None:
        with self._lock:
            self._catch_up()
            place = next(self._places)
            self._place[message] = place
            self._at[place] = message
            self._tenants.add(place, message.group_id)
            OWNERS[message] = self
            self._register_handles(place, message)
            self._sort(place, message)

    def remove(self, message: Any) -> None:
        with self._lock:
            place = self._place.pop(message, None)
            if place is None:
                raise ValueError("the message is not in this queue")
            del self._at[place]
            for handle in message.all_receipt_handles:
                if self._handles.get(handle) == place:
                    del self._handles[handle]
            self._set_in_flight(place, False)
            for group in (self._receivable, self._delayed):
                group.discard(place)
            self._tenants.forget(place)
            self._sorted_times.pop(place, None)
            if OWNERS.get(message) is self:
                del OWNERS[message]
            if self._entries() > _SPARE_ENTRIES * len(self._at) + 1024:
                self._rebuild(self._now)  # drop the heap entries of messages gone or moved on

    def __iter__(self) -> Iterator[Any]:
        with self._lock:
            return iter(list(self._place))

    def __len__(self) -> int:
        return len(self._place)

    # -- what SQS asks --------------------------------------------------------------

    def changed(self, message: Any) -> None:
        """A message's visibility, delay or receipt handle changed."""
        with self._lock:
            place = self._place.get(message)
            if place is not None:
                self._catch_up()
                self._register_handles(place, message)
                self._sort(place, message)

    def find(self, receipt_handle: str) -> Any | None:
        """The message that has or had this receipt handle, if it is in the queue."""
        with self._lock:
            place = self._handles.get(receipt_handle)
            return None if place is None else self._at.get(place)

    @contextlib.contextmanager
    def receivable(self, *, fair: bool = False) -> Iterator[Iterator[Any]]:
        """The messages a receive would return now, one at a time: in queue
        order, or with ``fair``, as an SQS fair queue orders them (see
        :class:`~jobkit.local.fair_queues.Tenants`; messages without a group keep queue order).

        A receive marks what it takes received (so it leaves the set, and
        tells :meth:`received`); what it passes over stays receivable. Hold
        it only while receiving."""
        with self._lock:
            self._catch_up()
            taken: set[int] = set()
            try:
                yield self._take(taken, fair)
            finally:
                for place in taken:
                    if place in self._receivable and place not in self._queued:
                        self._enqueue(place)

    def received(self, message: Any) -> None:
        """A receive took this message: it counts in its tenant's share of the queue's recent receives."""
        with self._lock:
            place = self._place.get(message)
            if place is not None:
                self._tenants.received(place)

    def counts(self) -> tuple[int, int, int]:
        """How many are receivable, delayed and in flight, at moto's clock."""
        with self._lock:
            self._catch_up()
            return len(self._receivable), len(self._delayed), len(self._in_flight)

    def has_receivable(self, now_ms: float) -> bool:
        """Whether a receive at ``now_ms`` (or at moto's clock, if later) would return a message."""
        with self._lock:
            self._advance(max(now_ms, self._now))
            return bool(self._receivable)

    def next_receivable_at(self, now_ms: float) -> float | None:
        """When (ms) the first message a receive would not return at ``now_ms``
        (or at moto's clock, if later) becomes receivable; None if there is none."""
        with self._lock:
            self._advance(max(now_ms, self._now))
            heap = self._wake_heap
            while heap:
                when, place = heap[0]
                message = self._at.get(place)
                if message is not None and place not in self._receivable and _wakes_at(message) == when:
                    return when
                heapq.heappop(heap)  # the message left, or its times changed since
            return None

    # -- keeping the index ------------------------------------------------------------

    def _register_handles(self, place: int, message: Any) -> None:
        for handle in message.all_receipt_handles:
            if handle is not None:
                self._handles[handle] = place

    def _entries(self) -> int:
        heaps = (self._in_flight_heap, self._delayed_heap, self._wake_heap)
        return sum(len(heap) for heap in heaps) + self._tenants.entries()

    def _catch_up(self) -> None:
        self._advance(self._models.unix_time_millis())

    def _advance(self, now: float) -> None:
        """Bring the sets to ``now``: the hidden messages whose time has come are
        receivable again. A reading a little behind the last one is taken as
        the last one (moto's real clock drops the microsecond's fractions)."""
        if now < self._now:
            if self._now - now > _CLOCK_SLACK_MS:
                self._rebuild(now)
            return
        self._now = now
        while self._in_flight_heap and self._in_flight_heap[0][0] < now:
            self._classify(heapq.heappop(self._in_flight_heap)[1])
        while self._delayed_heap and self._delayed_heap[0][0] <= now:
            self._classify(heapq.heappop(self._delayed_heap)[1])

    def _rebuild(self, now: float) -> None:
        """The clock went back: sort every message again."""
        self._now = now
        for group in (self._receivable, self._delayed, self._in_flight, self._queued):
            group.clear()
        self._sorted_times.clear()
        self._tenants.clear()
        self._in_flight_heap, self._delayed_heap, self._wake_heap = [], [], []
        for place, message in self._at.items():
            self._sort(place, message)

    def _classify(self, place: int) -> None:
        """One of a message's times has passed: which sets it belongs to now."""
        message = self._at.get(place)
        if message is not None:  # else it left the queue
            self._membership(place, message)

    def _sort(self, place: int, message: Any) -> None:
        """A message came or its times changed: its sets, and when it next changes.
        Times it was sorted at already have their heap entries (or have passed)."""
        in_flight, delayed = self._membership(place, message)
        times = (message.visible_at, message.delayed_until)
        if self._sorted_times.get(place) == times:
            return
        self._sorted_times[place] = times
        if in_flight:
            heapq.heappush(self._in_flight_heap, (message.visible_at, place))
        if delayed:
            heapq.heappush(self._delayed_heap, (message.delayed_until, place))
        if in_flight or delayed:
            heapq.heappush(self._wake_heap, (_wakes_at(message), place))

    def _membership(self, place: int, message: Any) -> tuple[bool, bool]:
        """Put a message in the sets it belongs to at ``_now``, as moto's
        ``visible`` and ``delayed`` decide. Returns (in flight, delayed)."""
        in_flight = not self._now > message.visible_at
        delayed = self._now < message.delayed_until
        self._set_in_flight(place, in_flight)
        _set_member(self._delayed, place, delayed)
        if in_flight or delayed:
            self._receivable.discard(place)
        elif place not in self._receivable:
            self._receivable.add(place)
            if place not in self._queued:
                self._enqueue(place)
        return in_flight, delayed

    def _set_in_flight(self, place: int, member: bool) -> None:
        if member != (place in self._in_flight):
            _set_member(self._in_flight, place, member)
            self._tenants.flying(place, member)

    def _enqueue(self, place: int) -> None:
        self._tenants.push(place)
        self._queued.add(place)

    def _take(self, taken: set[int], fair: bool) -> Iterator[Any]:
        while (place := self._tenants.pop(len(self._in_flight) if fair else None)) is not None:
            self._queued.discard(place)
            if place in taken or place not in self._receivable:
                continue  # taken already, or no longer receivable
            taken.add(place)
            yield self._at[place]


def _set_member(group: set[int], place: int, member: bool) -> None:
    if member:
        group.add(place)
    else:
        group.discard(place)


def _wakes_at(message: Any) -> float:
    """When (ms) a hidden message becomes receivable."""
    return max(message.visible_at, message.delayed_until)  # type: ignore[no-any-return]


#: How far (ms) a clock reading may be behind the index's time and still be taken as that time.
_CLOCK_SLACK_MS = 1.0

#: Heap entries an index keeps per message before it drops the stale ones.
_SPARE_ENTRIES = 4

#: The index each message is in: how a message's change reaches it (copies of a message are in none).
OWNERS: weakref.WeakKeyDictionary[Any, IndexedMessages] = weakref.WeakKeyDictionary()


def index_of(queue: Any) -> IndexedMessages:
    messages = queue._messages
    if not isinstance(messages, IndexedMessages):
        raise RuntimeError("this needs moto's queues indexed: jobkit.local.moto_patches.sqs_receive.indexed_queues()")
    return messages


def message_with_handle(queue: Any, receipt_handle: str) -> Any | None:
    """The message of a queue that has or had this receipt handle (moto's ``had_receipt_handle``)."""
    messages = queue._messages
    if isinstance(messages, IndexedMessages):
        return messages.find(receipt_handle)
    return next((m for m in messages if m.had_receipt_handle(receipt_handle)), None)


class MessagesAttribute:
    """``Queue._messages``, always an :class:`IndexedMessages`: moto's
    ``Queue.__init__``, ``purge_queue`` and any other assignment of a list
    are indexed, and so is a queue made before :func:`indexed_queues`."""

    def __get__(self, queue: Any, owner: type | None = None) -> Any:
        if queue is None:
            return self
        messages = queue.__dict__.get("_messages", ())
        if not isinstance(messages, IndexedMessages):
            messages = queue.__dict__["_messages"] = IndexedMessages(messages)
        return messages

    def __set__(self, queue: Any, messages: Iterable[Any]) -> None:
        queue.__dict__["_messages"] = messages if isinstance(messages, IndexedMessages) else IndexedMessages(messages)
