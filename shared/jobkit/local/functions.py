"""The runner functions of a local stack, as Lambda runs them: per queue, a
pool of containers, each with a runner built by the composition root, fed by
an event source mapping per lane that polls the lane's queue."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
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
        lanes: Mapping[str, tuple[str, str]],
        *,
        receivable: Callable[[str], bool],
        recursive_loop: str | Callable[[], str],
        registry: JobRegistry | None = None,
        seed: int | None = None,
    ) -> tuple[Runner, dict[str, EventSourceMapping]]:
        """The queue's first container's runner, and the mappings that feed its
        containers: one per lane (:mod:`jobkit.declaration.lanes`), as deployed.

        Args:
            lanes: each lane's key -> its queue's URL and ARN (the queue's own lane first).
            receivable: whether a lane (by key) has a message a receive would
                return (a mapping skips an empty queue without a request).
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
        recursion = RecursionGuard(function, recursive_loop)  # the function's: its lanes' messages count alike
        mappings = {
            key: EventSourceMapping(
                self._sqs,
                url,
                arn,
                containers.handle,
                batch_size=config.batch_size,
                function_name=function,
                timeout_s=config.timeout_s,
                memory_mb=config.memory_mb,
                clock=self._clock,
                region=self._region,
                receivable=functools.partial(receivable, key),
                recursion=recursion,
            )
            for key, (url, arn) in lanes.items()
        }
        return containers.first, mappings
