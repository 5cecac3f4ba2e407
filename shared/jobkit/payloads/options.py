"""The payload key of a job type: the message size over which push puts a
job's params in the payload bucket (:mod:`jobkit.payloads.offload`).

::

    [types.renderReport]
    offload_above_kb = 256     # params of a larger message go to the payload bucket

By default only a job that would not fit in a message is offloaded, and that
is also the cheapest: SQS bills each 64 KiB of a message as one request, but
an offloaded job's three S3 requests cost as much as 26 of them, so inline
costs less up to about 830 KiB (docs/benchmarks.md). A lower threshold keeps
large bodies out of Lambda's 6 MB events and out of DLQs. Without a payload
bucket the key does nothing, and a job too large for a message is refused at
push.
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
        " the bucket and send a reference to them; lower it to keep large bodies out of batches and DLQs,"
        " not for cost: below about 830 KiB inline costs less (docs/benchmarks.md); without a bucket it does"
        " nothing",
    ),
)


def threshold_bytes(offload_above_kb: int | None, limit: int) -> int:
    """The message size in bytes over which a job of that type is offloaded: at most ``limit``
    (what a message may hold)."""
    return limit if offload_above_kb is None else min(offload_above_kb * 1024, limit)
