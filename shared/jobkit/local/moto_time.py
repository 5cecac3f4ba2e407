"""moto on a virtual clock, with queues that cost the same at any depth, and more.

Everything here reaches into moto's internals, so it is kept in one place:

- moto reads the time through ``moto.core.utils.utcnow`` (datetimes) and, in
  its SQS models, ``unix_time`` / ``unix_time_millis``; every visibility and
  delay decision goes through those. They are patched to read the clock.
- moto's SQS keeps a queue's messages in a list, ``Queue._messages``, and
  answers almost everything by going through all of it: SendMessage
  computes every attribute of the queue (three scans) to read one setting;
  ReceiveMessage lists every visible message before it takes ten;
  DeleteMessage looks for its receipt handle in every message, twice, and
  ChangeMessageVisibility once; the queue's counts are scans. So each
  message costs O(queue depth), and a backlog of 100,000 costs hours. On
  AWS it costs the same at any depth. :func:`indexed_queues` puts an
  :class:`IndexedMessages` in place of the list: a list to moto's own code,
  which also keeps, at moto's clock, the messages a receive would return,
  the delayed ones and the ones in flight, when each hidden one comes back,
  and every receipt handle each message has had. moto's receive and delete
  use it instead of scanning, and are otherwise moto's, step for step (the
  same order, the same FIFO groups, redrive and retention check); the counts
  are the sizes of its sets. Every answer is the one a scan gives
  (``tests/functional/test_local_depth_equivalence.py`` runs random
  programs of SQS calls on moto with and without it, and compares). It also
  tells when the next hidden message becomes receivable, so a drain jumps
  there instead of polling (:func:`next_visible_at`), and whether a queue
  has anything to receive, so an empty queue costs no request
  (:func:`has_receivable`).
- moto ignores a standard queue's ``MessageGroupId``; SQS fair queues use it
  to deliver quiet tenants' messages ahead of a noisy tenant's backlog. The
  index takes receivable messages as a fair queue would (:class:`~jobkit.local.fair_queues.Tenants`);
  a queue without group IDs keeps moto's order, and a FIFO queue moto's groups.
- moto checks each received message's retention by computing *all* of the
  queue's attributes. :func:`faster_receives` reads the one attribute it
  needs instead; the check is the same.
- moto works the same things out again for every request: the method names
  of the service's response class (by inspecting it), an action's snake-case
  name, a DynamoDB update expression's parse (twice per UpdateItem) and its
  condition's (twice, with the same names and values), a deep copy of the
  parsed tree for each validation, the validation's checks of the parsed
  tree alone (which pass again for the same tree and names), and each
  expression processor's table of node types, at every node of the tree;
  and it draws a receipt handle from its random generator one letter at a
  time, 185 times. :func:`memoised_moto` remembers the answers (each depends
  only on what it is given), copies a parsed tree by unpickling it, and
  draws a handle's letters at once: a DynamoDB update costs about a third
  less, and what moto answers does not change
  (``tests/functional/test_local_depth_memoised_dynamodb.py`` compares).
- moto measures the 12-hour limit on a message's visibility timeout from the
  time the message was *sent*, so a message older than 12 hours can never have
  its visibility changed again, not even to 0. AWS measures it from the receive.
  :func:`aws_visibility_limit` applies AWS's rule.
- moto's DynamoDB evaluates a conditional write's condition and applies the
  write in separate steps, with no lock: two threads can both pass the same
  condition (24 of 30 simultaneous double deliveries of a ``deliver_once``
  job ran twice). On AWS a conditional write is atomic.
  :func:`serial_dynamodb` runs moto's item operations one at a time, so a
  concurrency test means on moto what it means on AWS.
- moto's SQS publishes no CloudWatch metrics. :func:`counting_sends` counts
  the messages each queue accepts (what ``NumberOfMessagesSent`` counts), and
  :func:`oldest_message_age` reads what ``ApproximateAgeOfOldestMessage``
  reports, so the local stack can publish them itself.
- moto's CloudWatch computes no percentile: GetMetricData answers ``p95``
  with a null value (and boto3 then fails to read the response).
  :func:`cloudwatch_percentiles` computes ``pNN`` statistics from the raw
  values, nearest-rank; AWS's are approximations from a sketch, within a few
  percent. As on AWS, values sent as statistic sets have no percentiles.
- moto's CloudWatch keeps every datapoint for ever, and GetMetricData scans
  them all. :func:`drop_metric_data_before` forgets the old ones.

Other differences of moto's CloudWatch that a reader of its metrics should know:

- GetMetricData cuts periods from ``StartTime`` to the second; AWS rounds a
  recent ``StartTime`` down to the minute, and keeps datapoints sent at
  standard resolution per minute (so AWS's first period can hold up to a
  minute more).
- A query that names dimensions matches datapoints of any namespace with
  that metric name and those dimensions; AWS matches the namespace too.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import heapq
import importlib
import itertools
import json
import math
import pickle
import re
import string
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from jobkit.clock import VirtualClock
from jobkit.local.fair_queues import Tenants


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


def next_visible_at(account_id: str, region: str, queue_names: Iterable[str], now: float) -> float | None:
    """When the next hidden or delayed message of these queues becomes receivable
    (epoch seconds), or None if none is waiting. Messages visible already are
    not waited for. Needs :func:`indexed_queues`."""
    from moto.sqs.models import sqs_backends

    backend: Any = sqs_backends[account_id][region]
    times = []
    for name in queue_names:
        queue = backend.queues.get(name)
        when = _index(queue).next_receivable_at(now * 1000) if queue else None
        if when is not None:
            times.append(when / 1000)
    return min(times) if times else None


@contextlib.contextmanager
def faster_receives() -> Iterator[None]:
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    backend_class = sqs_models.SQSBackend
    original = backend_class.is_message_valid_based_on_retention_period

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention_period = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention_period + message.sent_timestamp / 1000 > sqs_models.unix_time())

    backend_class.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
    try:
        yield
    finally:
        backend_class.is_message_valid_based_on_retention_period = original


def has_receivable(account_id: str, region: str, queue_name: str, now: float) -> bool:
    """Whether a queue has a message that a receive would return now. Needs :func:`indexed_queues`."""
    from moto.sqs.models import sqs_backends

    queue: Any = sqs_backends[account_id][region].queues.get(queue_name)
    return queue is not None and _index(queue).has_receivable(now * 1000)


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
            _OWNERS[message] = self
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
            if _OWNERS.get(message) is self:
                del _OWNERS[message]
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
_OWNERS: weakref.WeakKeyDictionary[Any, IndexedMessages] = weakref.WeakKeyDictionary()


def _index(queue: Any) -> IndexedMessages:
    messages = queue._messages
    if not isinstance(messages, IndexedMessages):
        raise RuntimeError("this needs moto's queues indexed: jobkit.local.moto_time.indexed_queues()")
    return messages


def _message_with_handle(queue: Any, receipt_handle: str) -> Any | None:
    """The message of a queue that has or had this receipt handle (moto's ``had_receipt_handle``)."""
    messages = queue._messages
    if isinstance(messages, IndexedMessages):
        return messages.find(receipt_handle)
    return next((m for m in messages if m.had_receipt_handle(receipt_handle)), None)


class _MessagesAttribute:
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


@contextlib.contextmanager
def indexed_queues() -> Iterator[None]:
    """Index moto's SQS queues (:class:`IndexedMessages`), so that what SQS
    does per message costs the same however deep the queue is."""
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    queue_class, message_class, backend_class = sqs_models.Queue, sqs_models.Message, sqs_models.SQSBackend
    patches = [
        (queue_class, "_messages", _MessagesAttribute()),
        (queue_class, "approximate_number_of_messages", property(lambda q: _index(q).counts()[0])),
        (queue_class, "approximate_number_of_messages_delayed", property(lambda q: _index(q).counts()[1])),
        (queue_class, "approximate_number_of_messages_not_visible", property(lambda q: _index(q).counts()[2])),
        (queue_class, "delete_message", _delete_message(sqs_models)),
        (backend_class, "receive_message", _receive_message(sqs_models)),
    ]
    patches += [(message_class, name, _reporting(getattr(message_class, name))) for name in _MESSAGE_CHANGES]
    with _patched(patches):
        try:
            yield
        finally:
            _unindex(sqs_models.sqs_backends)


#: The methods of moto's Message that change its visibility, delay or receipt handle.
_MESSAGE_CHANGES = ("change_visibility", "delay", "mark_received")


def _reporting(method: Any) -> Any:
    """``method``, then the message's index hears of the change."""

    def run(message: Any, *args: Any, **kwargs: Any) -> Any:
        result = method(message, *args, **kwargs)
        index = _OWNERS.get(message)
        if index is not None:
            index.changed(message)
        return result

    return run


def _delete_message(sqs_models: Any) -> Any:
    """moto's ``Queue.delete_message``, finding the message by its handle
    instead of testing every message twice."""

    def delete_message(self: Any, receipt_handle: str) -> None:
        if receipt_handle in self.deleted_messages:
            return  # deleted already: SQS accepts a second delete
        message = self._messages.find(receipt_handle)
        if message is None:
            raise sqs_models.ReceiptHandleIsInvalid()
        self.pending_messages.discard(message)
        self.deleted_messages.update(message.all_receipt_handles)
        self._messages.remove(message)

    return delete_message


def _receive_message(sqs_models: Any) -> Any:
    """moto's ``SQSBackend.receive_message``, step for step, except that it
    takes the receivable messages from the index instead of listing every
    visible one first."""

    def receive_message(
        self: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> list[Any]:
        queue = self.get_queue(queue_name)
        receive = _Receive(queue, visibility_timeout)
        result: list[Any] = []
        previous_result_count = 0
        polling_end = sqs_models.unix_time() + wait_seconds_timeout
        while not (result or (wait_seconds_timeout and sqs_models.unix_time() > polling_end)):
            with _index(queue).receivable(fair=not queue.fifo_queue) as messages:
                for message in messages:
                    if not receive.take(message):
                        continue
                    if not self.is_message_valid_based_on_retention_period(queue_name, message):
                        break  # moto's way with a message past its retention: received, never returned
                    returned = copy.deepcopy(message)  # moto returns a copy, its attributes filtered
                    sqs_models._filter_message_attributes(returned, message_attribute_names or [])
                    result.append(returned)
                    if len(result) >= count:
                        break
            receive.move_to_dlq()
            if previous_result_count == len(result):
                if wait_seconds_timeout == 0:
                    break
                queue.wait_for_messages(1)
                continue
            previous_result_count = len(result)
        return result

    return receive_message


class _Receive:
    """What moto keeps during one receive: the FIFO groups in flight when it
    began, and the messages it moves to the DLQ once it has looked."""

    def __init__(self, queue: Any, visibility_timeout: int) -> None:
        self._queue = queue
        self._visibility_timeout = visibility_timeout
        self._groups_in_flight = copy.deepcopy(queue.pending_message_groups)
        self._to_dlq: list[Any] = []

    def take(self, message: Any) -> bool:
        """moto's test of one message: False if passed over (its FIFO group is
        in flight, or it goes to the DLQ), else it is marked received."""
        queue = self._queue
        if not message.visible:
            return False
        if message in queue.pending_messages:  # it was in flight, and its visibility timeout ran out
            queue.pending_messages.remove(message)
            self._groups_in_flight = copy.deepcopy(queue.pending_message_groups)
        if message.group_id and queue.fifo_queue and message.group_id in self._groups_in_flight:
            return False
        policy = queue.redrive_policy
        if (
            queue.dead_letter_queue is not None
            and policy
            and message.approximate_receive_count >= policy["maxReceiveCount"]
        ):
            self._to_dlq.append(message)
            return False
        queue.pending_messages.add(message)
        message.mark_received(visibility_timeout=self._visibility_timeout)
        _index(queue).received(message)
        return True

    def move_to_dlq(self) -> None:
        for message in self._to_dlq:
            self._queue._messages.remove(message)
            self._queue.dead_letter_queue.add_message(message)
        self._to_dlq = []


def _unindex(sqs_backends: Any) -> None:
    """Give every queue back a plain list, in the same order."""
    for account in list(sqs_backends.values()):
        for backend in list(account.values()):
            for queue in list(backend.queues.values()):
                messages = queue.__dict__.get("_messages")
                if isinstance(messages, IndexedMessages):
                    queue.__dict__["_messages"] = list(messages)


@contextlib.contextmanager
def _patched(patches: Iterable[tuple[Any, str, Any]]) -> Iterator[None]:
    """Set these attributes, and on the way out put back what was there (or nothing)."""
    missing = object()
    saved = [(owner, name, owner.__dict__.get(name, missing)) for owner, name, _ in patches]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is missing:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


@contextlib.contextmanager
def memoised_moto() -> Iterator[None]:
    """Remember what moto works out again for every request from the same
    input: an action's method names, a name's snake case, a parsed update
    expression (its copies and checks, see :class:`_ParsedExpressions`) and
    condition, a DynamoDB expression processor's table of node types. And
    make receipt handles with one draw of moto's random generator, not 185."""
    core_responses: Any = importlib.import_module("moto.core.responses")
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    validators: Any = importlib.import_module("moto.dynamodb.parsing.validators")
    parser_class = importlib.import_module("moto.dynamodb.parsing.expressions").UpdateExpressionParser
    condition_class = importlib.import_module("moto.dynamodb.comparisons").ConditionExpressionParser
    traverser_class = importlib.import_module("moto.dynamodb.parsing.ast_nodes").DepthFirstTraverser
    snake_case = functools.lru_cache(maxsize=1024)(core_responses.camelcase_to_underscores)
    parsed = _ParsedExpressions(parser_class.make)
    patches = [
        (
            core_responses,
            "method_names_from_class",
            functools.lru_cache(maxsize=None)(core_responses.method_names_from_class),
        ),
        (core_responses, "camelcase_to_underscores", snake_case),
        (sqs_models, "camelcase_to_underscores", snake_case),
        (sqs_models, "generate_receipt_handle", _receipt_handle),
        (parser_class, "make", staticmethod(parsed.parse)),
        (validators, "deepcopy", parsed.deepcopy),
        (validators.Validator, "validate", lambda validator: parsed.validate(validator)),
        (condition_class, "parse", _parsed_conditions(condition_class.parse)),
        (traverser_class, "nodes_to_be_processed", _node_types),
        (traverser_class, "process", _process_node),
        (traverser_class, "traverse_node_recursively", _traverse),
    ]
    with _patched(patches):
        yield


class _ParsedExpressions:
    """moto's update expression parser, remembering each expression's tree.

    moto parses an update expression twice per UpdateItem, and its validator
    works on a deep copy of the tree (it never changes the tree it is given).
    So a tree is parsed once, kept with its pickled form, and each copy the
    validator asks for is unpickled: the same tree (no class in it copies
    itself in its own way), several times faster than ``copy.deepcopy``.
    Anything else the validator copies is deep-copied.

    A validation starts with checks that only look at the tree as parsed
    (one SET, REMOVE, ADD, DELETE clause each; no path twice; no key
    attribute) and either raise or change nothing. Once they have passed for
    a tree with the same names (and table keys), they would pass again: they
    are not run again. The rest of the validation is moto's."""

    def __init__(self, parse: Callable[[str], Any]) -> None:
        self._parse = functools.lru_cache(maxsize=1024)(parse)
        self._pickled: weakref.WeakKeyDictionary[Any, bytes | None] = weakref.WeakKeyDictionary()
        self._sources: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # copy -> its tree
        self._passed: weakref.WeakKeyDictionary[Any, set[Hashable]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def parse(self, expression: str) -> Any:
        tree = self._parse(expression)
        with self._lock:
            if tree not in self._pickled:
                self._pickled[tree] = _pickled(tree)
        return tree

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        pickled = self._pickled_tree(value) if memo is None else None
        if pickled is None:
            return copy.deepcopy(value, memo)
        tree = pickle.loads(pickled)
        with self._lock:
            self._sources[tree] = value
        return tree

    def validate(self, validator: Any) -> Any:
        """moto's ``Validator.validate``: each processor in turn over the tree,
        but for the leading checks already passed by this tree."""
        node = validator.node_to_validate
        with self._lock:
            source = self._sources.get(node)
            passed = self._passed.setdefault(source, set()) if source is not None else set()
        leading = source is not None
        for processor in validator.processors:
            check = _tree_check(processor) if leading else None
            leading = check is not None
            if check is not None and check in passed:
                continue
            node = processor.traverse(node)
            if check is not None:
                with self._lock:
                    passed.add(check)
        return node

    def _pickled_tree(self, value: Any) -> bytes | None:
        with self._lock:
            try:
                return self._pickled.get(value)
            except TypeError:  # no weak reference to it, or no hash: not a parsed tree
                return None


def _tree_check(processor: Any) -> Hashable | None:
    """What a check of moto's validation that looks only at the parsed tree
    depends on besides the tree (its class, the names, the table's keys);
    None for any other processor."""
    validators: Any = importlib.import_module("moto.dynamodb.parsing.validators")
    cls = type(processor)
    if cls is validators.ActionCountValidator:
        return (cls,)
    names = getattr(processor, "expression_attribute_names", None)
    named = None if names is None else frozenset(names.items())
    if cls is validators.OverlappingPathsValidator:
        return (cls, named)
    if cls is validators.UpdateHashRangeKeyValidator:
        return (cls, named, tuple(processor.table_key_attributes))
    return None


def _pickled(value: Any) -> bytes | None:
    """``value`` pickled, or None if it cannot be (it is deep-copied then)."""
    try:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return None


def _parsed_conditions(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto's ``ConditionExpressionParser.parse``, remembering its last answers:
    an UpdateItem parses its condition twice, with the same names and values.
    A parse returns the condition (which moto only evaluates) and notes the
    names and values it used in the parser; a remembered one does the same."""
    remembered: OrderedDict[str, tuple[Any, list[str], list[str]]] = OrderedDict()
    lock = threading.Lock()

    def parse_once(parser: Any) -> Any:
        try:
            key = json.dumps(
                [parser.condition_expression, parser.expression_attribute_names, parser.expression_attribute_values],
                sort_keys=True,
            )
        except TypeError:  # binary values: not worth remembering
            return parse(parser)
        with lock:
            answer = remembered.get(key)
        if answer is None:
            condition = parse(parser)
            answer = (condition, list(parser.expr_attr_names_found), list(parser.expr_attr_values_found))
            with lock:
                remembered[key] = answer
                while len(remembered) > _REMEMBERED_CONDITIONS:
                    remembered.popitem(last=False)
            return condition
        parser.expr_attr_names_found.extend(answer[1])
        parser.expr_attr_values_found.extend(answer[2])
        return answer[0]

    return parse_once


#: Condition expressions (with their names and values) remembered, the latest ones.
_REMEMBERED_CONDITIONS = 64


def _receipt_handle() -> str:
    """moto's receipt handle (185 random lowercase letters), drawn at once."""
    from moto.moto_api._internal import mock_random

    return "".join(mock_random.choices(string.ascii_lowercase, k=185))


class _ProcessingTable:
    """What a DynamoDB expression processor does with each type of node.

    moto's processors rebuild their table at every node, and test the node
    against each of its (abstract) classes; which class a type of node
    matches first is the same for every processor of a class, so it is
    worked out once."""

    #: (processor class, node type) -> the processor's table key it matches first, or None.
    _matches: dict[tuple[type, type], type | None] = {}

    def __init__(self, traverser: Any) -> None:
        self._traverser_type = type(traverser)
        self.handlers: dict[type, Any] = traverser._processing_map()
        self.node_types = tuple(self.handlers)

    def handler(self, node_type: type) -> Any:
        """The handler moto's ``process`` picks for this type: the first whose class it is of; or None."""
        key = (self._traverser_type, node_type)
        if key not in self._matches:
            self._matches[key] = next((cls for cls in self.handlers if issubclass(node_type, cls)), None)
        match = self._matches[key]
        return None if match is None else self.handlers[match]


def _processing_table(traverser: Any) -> _ProcessingTable:
    table: _ProcessingTable | None = traverser.__dict__.get("_jobkit_processing_table")
    if table is None:
        table = traverser.__dict__["_jobkit_processing_table"] = _ProcessingTable(traverser)
    return table


def _node_types(traverser: Any) -> tuple[type, ...]:
    return _processing_table(traverser).node_types


def _process_node(traverser: Any, node: Any) -> Any:
    handler = _processing_table(traverser).handler(type(node))
    return None if handler is None else handler(node)


#: Which types are moto's DynamoDB expression nodes.
_NODE_TYPES: dict[type, bool] = {}


def _is_node_type(node_type: type) -> bool:
    if node_type not in _NODE_TYPES:
        _NODE_TYPES[node_type] = issubclass(node_type, importlib.import_module("moto.dynamodb.parsing.ast_nodes").Node)
    return _NODE_TYPES[node_type]


def _traverse(traverser: Any, node: Any, child_id: int = -1) -> Any:
    """moto's ``DepthFirstTraverser.traverse_node_recursively``, step for step
    (children first, each announced to ``pre_processing_of_child``; then the
    node, if of a type the processor handles, replaced by what it returns),
    with each type's class tests made once instead of at every node."""
    table = _processing_table(traverser)
    before_child = traverser.pre_processing_of_child

    def visit(node: Any, child_id: int) -> Any:
        if _is_node_type(type(node)):
            parent = node.parent
            if node.children is not None:
                for index, child in enumerate(node.children):
                    before_child(node, index)
                    visit(child, index)
            handler = table.handler(type(node))
            if handler is not None:
                node = handler(node)
                node.parent = parent
                if parent:
                    parent.children[child_id] = node
        return node

    return visit(node, child_id)


#: moto's DynamoDB operations on items, each run under one lock by :func:`serial_dynamodb`.
_ITEM_OPERATIONS = (
    "put_item",
    "get_item",
    "query",
    "scan",
    "update_item",
    "delete_item",
    "transact_write_items",
    "execute_statement",
    "execute_transaction",
    "batch_execute_statement",
)


@contextlib.contextmanager
def serial_dynamodb() -> Iterator[None]:
    backend_class = importlib.import_module("moto.dynamodb.models").DynamoDBBackend
    lock = threading.RLock()
    originals = {name: getattr(backend_class, name) for name in _ITEM_OPERATIONS if hasattr(backend_class, name)}

    def serialised(operation: Any) -> Any:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return operation(self, *args, **kwargs)

        return run

    for name, operation in originals.items():
        setattr(backend_class, name, serialised(operation))
    try:
        yield
    finally:
        for name, operation in originals.items():
            setattr(backend_class, name, operation)


#: SQS's longest visibility timeout, counted from the receive.
_MAX_VISIBILITY_MS = 43_200 * 1000


@contextlib.contextmanager
def aws_visibility_limit() -> Iterator[None]:
    sqs_models: Any = importlib.import_module("moto.sqs.models")
    message_class, backend_class = sqs_models.Message, sqs_models.SQSBackend
    original_received, original_change = message_class.mark_received, backend_class.change_message_visibility

    def mark_received(self: Any, visibility_timeout: int | None = None) -> None:
        original_received(self, visibility_timeout)
        self.jobkit_received_at = sqs_models.unix_time_millis()

    def change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
        queue = self.get_queue(queue_name)
        message = _message_with_handle(queue, receipt_handle)
        if message is None:
            raise sqs_models.ReceiptHandleIsInvalid
        received_at = getattr(message, "jobkit_received_at", message.sent_timestamp)
        until = sqs_models.unix_time_millis() + int(visibility_timeout) * 1000
        if until - received_at > _MAX_VISIBILITY_MS:
            raise sqs_models.InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]"
            )
        message.change_visibility(visibility_timeout)
        if message.visible and message in queue.pending_messages:
            queue.pending_messages.remove(message)

    message_class.mark_received = mark_received
    backend_class.change_message_visibility = change_message_visibility
    try:
        yield
    finally:
        message_class.mark_received, backend_class.change_message_visibility = original_received, original_change


class SentCounts:
    """Messages accepted per SQS queue name since the last :meth:`take`, from
    any client of the emulated SQS (another process's too, through the server)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, queue_name: str) -> None:
        with self._lock:
            self._counts[queue_name] += 1

    def take(self) -> Counter[str]:
        """The counts so far, and start again from zero."""
        with self._lock:
            counts, self._counts = self._counts, Counter()
        return counts


@contextlib.contextmanager
def counting_sends(counts: SentCounts) -> Iterator[None]:
    """Count every message SQS accepts into ``counts``: SendMessage and each
    entry of SendMessageBatch (moto sends a batch's entries one by one). As
    with AWS's ``NumberOfMessagesSent``, SQS's own moves to a DLQ are not sends."""
    backend_class = importlib.import_module("moto.sqs.models").SQSBackend
    original = backend_class.send_message

    def send_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        message = original(self, queue_name, *args, **kwargs)
        counts.add(queue_name)
        return message

    backend_class.send_message = send_message
    try:
        yield
    finally:
        backend_class.send_message = original


#: SQS's ApproximateAgeOfOldestMessage passes over messages received this many times.
_AGE_RECEIVE_LIMIT = 3


def oldest_message_age(account_id: str, region: str, queue_name: str, now: float) -> float | None:
    """What SQS's ``ApproximateAgeOfOldestMessage`` reports for a queue, in
    seconds: the age of its oldest message not yet deleted (in flight and
    delayed ones included), passing over messages received three times or more
    unless there are only such. ``None`` when the queue is empty."""
    from moto.sqs.models import sqs_backends

    queue: Any = sqs_backends[account_id][region].queues.get(queue_name)
    messages = list(queue._messages) if queue is not None else []
    if not messages:
        return None
    fresh = [m for m in messages if m.approximate_receive_count < _AGE_RECEIVE_LIMIT] or messages
    oldest_ms: float = min(m.sent_timestamp for m in fresh)
    return max(0.0, now - oldest_ms / 1000)


_PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?|100)")


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile (0 < p <= 100), or None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = math.ceil(p / 100 * len(ordered))
    return ordered[min(max(rank, 1), len(ordered)) - 1]


@contextlib.contextmanager
def cloudwatch_percentiles() -> Iterator[None]:
    statistics_class = importlib.import_module("moto.cloudwatch.models").Statistics
    original = statistics_class.get_statistics_for_type

    def get_statistics_for_type(self: Any, stat: str) -> Any:
        match = _PERCENTILE.fullmatch(stat)
        if match is None or float(match[1]) == 0:
            return original(self, stat)
        return percentile(self.metric_single_values_list, float(match[1]))

    statistics_class.get_statistics_for_type = get_statistics_for_type
    try:
        yield
    finally:
        statistics_class.get_statistics_for_type = original


def drop_metric_data_before(account_id: str, region: str, when: float) -> int:
    """Forget the datapoints of moto's CloudWatch stamped before ``when``
    (epoch seconds), from the front of its list, where they arrive in time
    order; one sent late with an old stamp stays. Returns how many were dropped.

    The list is cut in place, in one step, so a datapoint that another thread
    appends meanwhile is kept."""
    from moto.cloudwatch.models import cloudwatch_backends

    data: list[Any] = cloudwatch_backends[account_id][region].metric_data
    cutoff = datetime.fromtimestamp(when, UTC)
    naive_cutoff = cutoff.replace(tzinfo=None)
    count = 0
    for datum in data:  # stops at the first recent one
        stamp = datum.timestamp
        if stamp >= (naive_cutoff if stamp.tzinfo is None else cutoff):
            break
        count += 1
    if count:
        del data[:count]
    return count
