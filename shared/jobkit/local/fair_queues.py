"""An SQS fair queue's delivery order, for the local stack's queues
(:mod:`jobkit.local.moto_patches` keeps one :class:`Tenants` per queue).

moto delivers a standard queue's messages in queue order whatever their
``MessageGroupId``; AWS's fair queues let a quiet tenant's messages go ahead
of a noisy tenant's backlog. docs/flow-control.md says how faithful this
model is.
"""

from __future__ import annotations

import heapq
from collections import Counter, deque


class Tenants:
    """A queue's receivable messages by tenant, taken in the order an SQS fair
    queue delivers them.

    A tenant is a ``MessageGroupId``; each message without one is a tenant of
    its own (they share one heap here, in queue order, and are never noisy).
    A tenant is *noisy* when it has more than 10% of the queue's in-flight
    messages and at least 30 of them, or more than 10% of the last
    :data:`_RECENT_RECEIVES` messages received: that share of receives stands
    for SQS's share of the consumers' recent processing time (one message
    costs the same as another; a fleet on a frozen clock has no processing
    time to measure). A fair take gives the oldest message of a quiet tenant
    first, in queue order across them; when only noisy tenants have messages,
    the oldest of the one with the fewest in flight. With no noisy tenant,
    or taken unfairly (a FIFO queue), the order is the queue's.

    Each take costs O(log n) and a look at the noisy tenants (at most a few
    dozen, by their definition), never a pass over the backlog.
    """

    def __init__(self) -> None:
        self._group: dict[int, str | None] = {}  # place -> its MessageGroupId
        self._heaps: dict[str | None, list[int]] = {}  # tenant -> its receivable places (stale ones too)
        self._heads: list[tuple[int, str | None]] = []  # (first place, tenant), stale entries too
        self._flying: Counter[str] = Counter()  # tenant -> messages in flight
        self._crowded: set[str] = set()  # the tenants with at least _NOISY_IN_FLIGHT in flight
        self._recent: deque[str | None] = deque()  # the tenants of the latest receives
        self._recent_counts: Counter[str] = Counter()
        self._busy: set[str] = set()  # tenants that had over a tenth of the receives when they last got one

    def add(self, place: int, group: str | None) -> None:
        self._group[place] = group

    def forget(self, place: int) -> None:
        self._group.pop(place, None)

    def clear(self) -> None:
        """Forget the heaps and the counts in flight (the index sorts every message again)."""
        self._heaps, self._heads = {}, []
        self._flying.clear()
        self._crowded.clear()

    def entries(self) -> int:
        return len(self._heads) + sum(len(heap) for heap in self._heaps.values())

    def push(self, place: int) -> None:
        """A place is receivable (again)."""
        tenant = self._group.get(place)
        heap = self._heaps.setdefault(tenant, [])
        heapq.heappush(heap, place)
        if heap[0] == place:
            heapq.heappush(self._heads, (place, tenant))

    def pop(self, in_flight: int | None) -> int | None:
        """The next place to take, out of its heap (it may be stale: the caller
        checks). ``in_flight`` is the queue's count for a fair take; None takes
        in queue order."""
        noisy = self._noisy(in_flight) if in_flight is not None else set()
        skipped: list[tuple[int, str | None]] = []
        chosen: str | None = None
        found = False
        heads = self._heads
        while heads:
            head, tenant = heads[0]
            heap = self._heaps.get(tenant)
            if not heap or heap[0] != head:
                heapq.heappop(heads)  # the tenant's first place moved on
            elif tenant in noisy:
                skipped.append(heapq.heappop(heads))
            else:
                chosen, found = tenant, True
                break
        for entry in skipped:
            heapq.heappush(heads, entry)
        if not found:
            waiting = [(self._flying[t], self._heaps[t][0], t) for t in noisy if self._heaps.get(t)]
            if not waiting:
                return None
            chosen = min(waiting)[2]
        heap = self._heaps[chosen]
        place = heapq.heappop(heap)
        if heap:
            heapq.heappush(heads, (heap[0], chosen))
        else:
            del self._heaps[chosen]
        return place

    def flying(self, place: int, member: bool) -> None:
        """A message went in flight (``member``) or left it."""
        tenant = self._group.get(place)
        if tenant is None:
            return
        self._flying[tenant] += 1 if member else -1
        if self._flying[tenant] >= _NOISY_IN_FLIGHT:
            self._crowded.add(tenant)
        else:
            self._crowded.discard(tenant)
            if self._flying[tenant] <= 0:
                del self._flying[tenant]

    def received(self, place: int) -> None:
        tenant = self._group.get(place)
        self._recent.append(tenant)
        if tenant is not None:
            self._recent_counts[tenant] += 1
            if self._recent_counts[tenant] * _NOISY_SHARE > len(self._recent):
                self._busy.add(tenant)
        if len(self._recent) > _RECENT_RECEIVES:
            gone = self._recent.popleft()
            if gone is not None:
                self._recent_counts[gone] -= 1
                if self._recent_counts[gone] <= 0:
                    del self._recent_counts[gone]

    def _noisy(self, in_flight: int) -> set[str]:
        noisy = {t for t in self._crowded if self._flying[t] * _NOISY_SHARE > in_flight}
        receives = len(self._recent)
        for tenant in list(self._busy):
            if self._recent_counts.get(tenant, 0) * _NOISY_SHARE > receives:
                noisy.add(tenant)
            else:  # its share only grows again with a receive of its own
                self._busy.discard(tenant)
        return noisy


#: A fair queue's noisy tenant has over 1/_NOISY_SHARE of the messages in flight (and
#: _NOISY_IN_FLIGHT of them), or of the recent receives.
_NOISY_SHARE = 10
_NOISY_IN_FLIGHT = 30

#: How many of a queue's latest receives stand for its consumers' "recent processing time".
_RECENT_RECEIVES = 1000
