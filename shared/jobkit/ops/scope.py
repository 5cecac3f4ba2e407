"""What an ops command works on: a job type, or a whole queue.

Types may share a queue (and so a DLQ). The rule, which every DLQ command
follows:

- a TYPE with a queue of its own means that queue's whole DLQ (whatever is in
  it, even a message that names no type or another one: it can only have come
  from this queue);
- a TYPE on a shared queue means that type's messages only, told apart by the
  ``JobType`` message attribute (or, failing that, the body's ``type``);
- a QUEUE name (e.g. ``lowTraffic``) means the queue's whole DLQ.

A queue with priority lanes has a DLQ per lane: a TARGET means each of them
in turn (:func:`resolve_scopes`), or one lane's, if a priority is named.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from jobkit.core.errors import JobKitError
from jobkit.declaration.config import Declaration
from jobkit.declaration.lanes import lane_key
from jobkit.declaration.params_schema import ParamsSchema
from jobkit.sqs import QueueDirectory


@dataclass(frozen=True)
class Scope:
    """A resolved TYPE or QUEUE argument.

    Attributes:
        name: the argument as given.
        queue: the declared queue it lives on.
        queue_types: every type of that queue.
        type_filter: the one type to keep, when the queue is shared and a type
            was named; ``None`` means the whole queue.
        param_schemas: the declared ``params_schema`` of the queue's types that have one.
        priority: the queue's lane whose queue and DLQ these are (None: the queue's own).
    """

    name: str
    queue: str
    queue_types: tuple[str, ...]
    type_filter: str | None
    sqs_name: str
    dlq_name: str
    param_schemas: Mapping[str, ParamsSchema] = field(default_factory=dict, compare=False)
    priority: str | None = None

    @property
    def shared(self) -> bool:
        return len(self.queue_types) > 1

    @property
    def whole_queue(self) -> bool:
        return self.type_filter is None

    def includes(self, job_type: str | None) -> bool:
        """Whether a message of ``job_type`` (``None``: unknown) is in scope."""
        return self.type_filter is None or job_type == self.type_filter

    def describe(self) -> str:
        """For prompts and reports: which messages of which DLQ."""
        if self.type_filter is None:
            shared = f" (types {', '.join(self.queue_types)})" if self.shared else ""
            return f"every message in {self.dlq_name}{shared}"
        others = ", ".join(t for t in self.queue_types if t != self.type_filter)
        return f"the {self.type_filter} messages in {self.dlq_name} (shared with {others})"

    def urls(self, directory: QueueDirectory) -> tuple[str, str]:
        """The (queue URL, DLQ URL) pair."""
        return directory.url(self.sqs_name), directory.url(self.dlq_name)


def resolve_scope(declaration: Declaration, name: str) -> Scope:
    """Resolve a TYPE or QUEUE argument against the declaration.

    Raises:
        JobKitError: ``name`` is neither a declared type nor a declared queue.
    """
    if name in declaration.types:
        queue = declaration.types[name].queue
        types = declaration.queues[queue].types
        type_filter = name if len(types) > 1 else None
    elif name in declaration.queues:
        queue, type_filter = name, None
        types = declaration.queues[queue].types
    else:
        raise JobKitError(
            f"{name!r} is neither a job type nor a queue of {declaration.source}"
            f" (types: {', '.join(sorted(declaration.types))}; queues: {', '.join(declaration.queues)})"
        )
    schemas = {t: s for t in types if (s := declaration.types[t].params_schema) is not None}
    return Scope(name, queue, types, type_filter, declaration.queue_name(queue), declaration.dlq_name(queue), schemas)


def resolve_scopes(declaration: Declaration, name: str, priority: str | None = None) -> list[Scope]:
    """A TYPE or QUEUE argument in each lane of its queue, the queue's own
    first (:mod:`jobkit.declaration.lanes`); or in the one lane ``priority`` names.

    Raises:
        JobKitError: ``name`` is neither a declared type nor a declared queue,
            or its queue has no lane ``priority``.
    """
    scope = resolve_scope(declaration, name)
    lanes = declaration.queues[scope.queue].lanes
    if priority is not None:  # ("default": the queue's own lane)
        lanes = tuple(lane for lane in lanes if lane.key == lane_key(scope.queue, priority))
        if not lanes:
            has = ", ".join(str(lane.priority) for lane in declaration.queues[scope.queue].lanes[1:]) or "none"
            raise JobKitError(f"queue {scope.queue!r} has no priority lane {priority!r} (its lanes: {has})")
    return [
        replace(
            scope,
            sqs_name=declaration.queue_name(lane.key),
            dlq_name=declaration.dlq_name(lane.key),
            priority=lane.priority,
        )
        for lane in lanes
    ]
