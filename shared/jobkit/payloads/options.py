"""The payload key of a job type: the message size over which push puts a
job's params in the payload bucket (:mod:`jobkit.payloads.offload`).

::

    [types.renderReport]
    offload_above_kb = 64      # every job costs one SQS request; larger params go to S3

By default only a job that would not fit in a message is offloaded. SQS bills
each 64 KiB of a message as one request, so a lower threshold can cost less:
docs/benchmarks.md compares the two. Without a payload bucket the key does
nothing, and a job too large for a message is refused at push.
"""

from __future__ import annotations

from typing import Any

from jobkit.declaration.options import TypeOption, Where, int_in

#: The largest threshold: SQS's message limit (1 MiB). A job over what a
#: message may hold is offloaded whatever the threshold.
MAX_OFFLOAD_ABOVE_KB = 1024


def _kib(where: Where, raw: Any) -> int:
    return int(
        where.check(
            raw, int_in(1, MAX_OFFLOAD_ABOVE_KB), f"must be a whole number of KiB from 1 to {MAX_OFFLOAD_ABOVE_KB}"
        )
    )


PAYLOAD_OPTIONS = (
    TypeOption(
        "offload_above_kb",
        None,
        _kib,
        "(a full message)",
        "with a payload bucket, put the params of a job whose SQS message would be over this many KiB in"
        " the bucket and send a reference to them: SQS bills each 64 KiB of a message as one request, so 64"
        " keeps every send to one (docs/benchmarks.md compares the costs); without a bucket it does nothing",
    ),
)


def threshold_bytes(offload_above_kb: int | None, limit: int) -> int:
    """The message size in bytes over which a job of that type is offloaded: at most ``limit``
    (what a message may hold)."""
    return limit if offload_above_kb is None else min(offload_above_kb * 1024, limit)
