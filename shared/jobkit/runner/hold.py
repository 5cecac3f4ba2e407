"""Holding a job back: what a concurrency or rate limit does with a job over
its limit (and a limit that cannot reach the jobs table, when it fails closed).

The job is sent again with a delay, which is not an attempt: at least the
time the limit says it must wait, and at most a backoff that doubles with
each hold (2, 4, 8 ... 60 s), at random in between ("full jitter"), so that
jobs held together come back spread out rather than together. A job held back
longer than its type's ``max_held_s`` in one hold is dead-lettered with the
reason ``held_too_long``: a limit that starves a type shows in the DLQ, not as
jobs circling forever.

One hold is the run of consecutive holds since the job last got past its
limits: the clock restarts when a held copy is delivered a second time (its
first delivery got past the limits and ran, or died), and when the copy is not
the one the hold sent (a native DLQ redrive keeps a message's attributes on a
new message sent long after the hold). So attempts that fail between holds,
or a redrive, never count as time held back.
"""

from __future__ import annotations

import math

from jobkit.core.clock import Clock
from jobkit.core.errors import HeldTooLong
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.runner.delivery import Delivery, string_attribute_of
from jobkit.runner.failures import Failures
from jobkit.runner.requeue import Requeue
from jobkit.sqs import HELD_ATTRIBUTE, string_attribute
from jobkit.sqs.first_seen import sent_at

#: The longest backoff between holds: a held job checks its limit at least this often.
MAX_BACKOFF_S = 60
#: SQS's longest delay.
MAX_DELAY_S = 900


class Hold:
    def __init__(self, clock: Clock, requeue: Requeue, failures: Failures) -> None:
        self._clock = clock
        self._requeue = requeue
        self._failures = failures

    def __call__(self, delivery: Delivery, wait_s: float | None, why: str) -> RecordResult:
        """Defer ``delivery`` for at least ``wait_s`` (``None``: unknown), or dead-letter it."""
        now = self._clock.now()
        count, since = held_before(delivery, now)
        held_s = now - since
        if held_s >= delivery.job_type.max_held_s:
            error = HeldTooLong(
                f"held back for {held_s:.0f} s, over the type's max_held_s of {delivery.job_type.max_held_s}: {why}"
            )
            delivery.attempt -= 1  # this delivery was no attempt: the count is of the attempts that ran
            return self._failures.dead_letter(delivery, "held_too_long", error, str(error), {"reason": why})
        # "full jitter": anywhere from the limit's own wait up to a backoff that doubles
        # with each hold, so jobs held together spread out and keep coming back
        wait = wait_s or 0.0
        ceiling = max(wait, min(MAX_BACKOFF_S, 2 ** min(count + 1, 16)))
        delay = wait + (ceiling - wait) * self._failures.rng.random()
        delay_s = max(1, min(MAX_DELAY_S, math.ceil(delay)))
        attributes = {HELD_ATTRIBUTE: string_attribute(f"{count + 1} {since!r} {now!r}")}
        return self._requeue(delivery, delay_s, Outcome.LIMITED, why, attributes)


#: How far a held copy's ``SentTimestamp`` may be from the time its hold sent it
#: (the runner's clock against SQS's) and still be that copy.
SENT_TOLERANCE_S = 60.0


def held_before(delivery: Delivery, now: float) -> tuple[int, float]:
    """How many times the job was held in its current hold, and since when:
    ``(0, now)`` for a job not being held. The attribute (``"count since
    sent"``) counts only on the first delivery of the copy the hold sent: a
    copy delivered again was let through (or its batch died) since, and a copy
    sent at another time than its hold's (a native redrive) is another message.
    A garbled or future value (a sender's, or a skewed clock) counts from now."""
    text = string_attribute_of(delivery.record, HELD_ATTRIBUTE)
    try:
        count_text, since_text, sent_text = (text or "").split()
        count, since, held_at = int(count_text), float(since_text), float(sent_text)
    except ValueError:
        return 0, now
    if not (0 <= count <= 10_000) or not all(map(math.isfinite, (since, held_at))) or not since <= held_at <= now:
        return 0, now
    sent = sent_at(delivery.record)
    if delivery.receive_count > 1 or (sent is not None and abs(sent - held_at) > SENT_TOLERANCE_S):
        return 0, now
    # no hold began before SQS first saw the job: a sender's own value cannot say so
    return count, max(since, delivery.seen_at) if delivery.seen_at is not None else since
