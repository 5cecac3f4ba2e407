"""The keys of batches (:mod:`jobkit.batches`): which types' jobs may be a
batch's members, and which a batch may push when it ends."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol, TypeVar

from jobkit.declaration.options import flag

BATCH_OPTIONS = (
    flag(
        "batches",
        "let its jobs be members of batches (`group.batch(...)`): the batch counts each member's end, and"
        " pushes its callbacks once every member has ended; the jobs a member pushes join its batch; costs"
        " 2 DynamoDB writes per member pushed and 2 per member that ends, and nothing for jobs outside"
        " batches (0 when false)",
    ),
    flag(
        "batch_callback",
        "let a batch push it when it ends (`on_complete=`, `on_success=`); the runners of `batches` types"
        " may then send to its queue. Its jobs are delivered once (`deliver_once`): a callback pushed again"
        " after a fault (its push done, its mark lost) runs once",
    ),
)


class _Declared(Protocol):
    @property
    def deliver_once(self) -> bool: ...
    @property
    def batches(self) -> bool: ...
    @property
    def batch_callback(self) -> bool: ...
    @property
    def pushes(self) -> tuple[str, ...]: ...


T = TypeVar("T", bound=_Declared)


def with_batch_callbacks(types: Mapping[str, T]) -> dict[str, T]:
    """The types, each ``batches`` type pushing every ``batch_callback`` type (the
    runner that ends a batch's last member pushes its callbacks, so it must know
    them and may send to their queues), and each ``batch_callback`` type
    delivered once (a callback whose push is done but whose mark is lost may be
    pushed again, with the same ID: it runs once)."""
    callbacks = tuple(sorted(name for name, t in types.items() if t.batch_callback))
    out: dict[str, T] = {}
    for name, t in types.items():
        if t.batches and callbacks:
            t = replace(t, pushes=tuple(dict.fromkeys((*t.pushes, *callbacks))))  # type: ignore[type-var]
        if t.batch_callback and not t.deliver_once:
            t = replace(t, deliver_once=True)  # type: ignore[type-var]
        out[name] = t
    return out
