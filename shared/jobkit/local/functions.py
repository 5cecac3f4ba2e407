"""The runner functions of a local stack, as Lambda runs them: per queue, a
pool of containers, each with a runner built by the composition root, fed by
an event source mapping that polls the queue."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock
from jobkit.local.containers import Containers
from jobkit.local.esm import EventSourceMapping
from jobkit.local.recursion import RecursionGuard
from jobkit.local.results import Tee

if TYPE_CHECKING:
    from jobkit.runner import Runner
    from jobkit.runner.registry import JobRegistry
    from jobkit.wiring import Wiring


class RunnerFunctions:
    """Deploys each queue's runner function and its event source mapping.

    Args:
        wiring: the composition root; each container's runner is built by it,
            with only its queue's types and those they push, as deployed.
        sqs: the client the mappings poll with.
        region: the emulated region.
        clock: the stack's clock.
        sinks: receivers of every record result (``record(result)``, ``flush()``),
            shared by every function's runners.
    """

    def __init__(self, wiring: Wiring, sqs: Any, region: str, clock: Clock, sinks: Sequence[Any]) -> None:
        self._wiring = wiring
        self._sqs = sqs
        self._region = region
        self._clock = clock
        self._metrics = Tee(*sinks)

    def deploy(
        self,
        queue: str,
        queue_url: str,
        queue_arn: str,
        *,
        receivable: Callable[[], bool],
        recursive_loop: str | Callable[[], str],
        registry: JobRegistry | None = None,
        seed: int | None = None,
    ) -> tuple[Runner, EventSourceMapping]:
        """The queue's first container's runner, and the mapping that feeds its containers.

        Args:
            receivable: whether the queue has a message a receive would return
                (a mapping skips an empty queue without a request).
            recursive_loop: the function's ``RecursiveLoop``, or how to read it
                when a batch comes.
            registry: resolves job classes (default: from the declaration).
            seed: seeds each container's backoff jitter.
        """
        declaration = self._wiring.declaration
        config = declaration.queues[queue]

        def container() -> Runner:
            return self._wiring.runner(queue, metrics=self._metrics, registry=registry, rng=random.Random(seed))

        containers = Containers(container)
        function = declaration.names.runner(queue)
        mapping = EventSourceMapping(
            self._sqs,
            queue_url,
            queue_arn,
            containers.handle,
            batch_size=config.batch_size,
            function_name=function,
            timeout_s=config.timeout_s,
            memory_mb=config.memory_mb,
            clock=self._clock,
            region=self._region,
            receivable=receivable,
            recursion=RecursionGuard(function, recursive_loop),
        )
        return containers.first, mapping
