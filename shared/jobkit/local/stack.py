"""LocalStack: the whole jobkit stack on an embedded moto.

::

    with LocalStack(load_declaration(), clock=VirtualClock(flowing=True)) as stack:
        stack.queue_group("enwiki").push(JobSpecification("refreshLinks", {"title": "Main Page"}))
        stack.drain()

Queues, DLQs and the table are created from the declaration. Each queue gets
its own :class:`~jobkit.runner.Runner` (its own "container") fed by an
:class:`~jobkit.local.esm.EventSourceMapping` emulator. With a
:class:`~jobkit.clock.VirtualClock`, moto's clock is the same clock, and
:meth:`LocalStack.drain` skips idle waits (backoffs, delays) instead of sleeping.
moto's queues are indexed (:mod:`jobkit.local.moto_time`), so pushing and
running a job cost the same with 100 or 100,000 queued, and a queue with
nothing to receive costs no request.

With ``server=True`` the AWS API is served on a loopback port, quietly (no
line per request); a port that is taken is a
:class:`~jobkit.local.server.PortInUse` at once. With
``publish_metrics=True`` what SQS and the runners measure goes into the
emulated CloudWatch as on AWS (:class:`~jobkit.local.results.MetricsPublisher`),
for ``jobkit top`` and ``jobkit queues``.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from jobkit.clock import Clock, SystemClock, VirtualClock
from jobkit.config import Declaration
from jobkit.dedup import DedupStore
from jobkit.local.containers import Containers
from jobkit.local.dynamodb_rules import dynamodb_rules
from jobkit.local.esm import EventSourceMapping
from jobkit.local.fleet import Fleet
from jobkit.local.lambda_model import lambda_control_plane, recursion_setting
from jobkit.local.moto_query import partition_queries
from jobkit.local.moto_time import (
    SentCounts,
    aws_visibility_limit,
    cloudwatch_percentiles,
    counting_sends,
    faster_receives,
    has_receivable,
    indexed_queues,
    memoised_moto,
    moto_on_clock,
    next_visible_at,
    serial_dynamodb,
)
from jobkit.local.provision import provision_queues, provision_table
from jobkit.local.recursion import RecursionGuard, stamp_sends
from jobkit.local.results import MetricsPublisher, ResultLog, Tee
from jobkit.local.scheduler import LocalScheduler
from jobkit.local.server import serving_aws
from jobkit.local.sqs_rules import sqs_rules
from jobkit.push import JobQueueGroup
from jobkit.resources import RUNNER_RECURSIVE_LOOP
from jobkit.runner import Runner
from jobkit.runner.registry import JobRegistry
from jobkit.sqs import new_messages, receive_messages
from jobkit.wiring import AwsClients, Wiring

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from jobkit.endpoint.service import PushEndpoint
    from jobkit.records.store import Records

ACCOUNT_ID = "123456789012"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_session_token": "testing"}


class LocalStack:
    """jobkit's resources on an embedded AWS, with runners and event source mappings.

    Args:
        declaration: the job types (``load_declaration()``).
        clock: the time source. A :class:`VirtualClock` also drives moto's clock.
        server: serve the AWS API on a loopback port (for other processes), instead
            of in-process only. Requests are not logged.
        port: the port for ``server=True``; 0 picks a free one. A port in use
            raises :class:`~jobkit.local.server.PortInUse`.
        region: the emulated region.
        seed: seeds backoff jitter, for repeatable runs.
        emf_stream: if given, runners also write their EMF metrics documents here.
        sinks: more receivers of every record result (``record(result)``, ``flush()``).
        registry: resolves job classes for the runners (default: from the declaration).
        template: create the resources from this SAM template (through
            aws-sam-translator and moto's CloudFormation) instead of directly
            from the declaration.
        publish_metrics: put what SQS and the runners measure into the
            emulated CloudWatch every few seconds of the clock, as AWS would
            (:class:`~jobkit.local.results.MetricsPublisher`), so the ops
            views show rates, pickup delays and ages.
        recursive_loop: the runners' ``RecursiveLoop`` setting, as deployed
            (default: the template's, or what the ``template`` given says);
            ``"Terminate"`` shows what Lambda's recursive loop detection does
            to a stack without it (:mod:`jobkit.local.recursion`).
    """

    def __init__(
        self,
        declaration: Declaration,
        *,
        clock: Clock | None = None,
        server: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        region: str = "us-east-1",
        seed: int | None = None,
        emf_stream: TextIO | None = None,
        sinks: Sequence[Any] = (),
        registry: JobRegistry | None = None,
        template: Path | None = None,
        publish_metrics: bool = False,
        recursive_loop: str | None = None,
    ) -> None:
        self.declaration = declaration
        self.clock = clock or SystemClock()
        self.region = region
        self.results = ResultLog()
        self.endpoint_url: str | None = None
        self.queue_urls: dict[str, str] = {}
        self._server_wanted = server
        self._host, self._port = host, port
        self._seed = seed
        self._emf_stream = emf_stream
        self._sinks = tuple(sinks)
        self._registry = registry
        self._template = template
        self.stack_outputs: dict[str, str] = {}
        self._exit = contextlib.ExitStack()
        self.mappings: dict[str, EventSourceMapping] = {}
        self.runners: dict[str, Runner] = {}
        self.scheduler: LocalScheduler | None = None  # the declaration's schedules, on the stack's clock
        self._publish_metrics = publish_metrics
        self._recursive_loop: dict[str, str | Callable[[], str]] = {}
        if recursive_loop is not None:
            self._recursive_loop = dict.fromkeys(declaration.queues, recursive_loop)
        self._sent = SentCounts()
        #: Set with ``publish_metrics``; :meth:`MetricsPublisher.publish` publishes at once.
        self.metrics_publisher: MetricsPublisher | None = None

    # -- lifecycle ---------------------------------------------------------------

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalStack:
        try:
            self._start_aws()
            self.clients = AwsClients(region=self.region, endpoint_url=self.endpoint_url, credentials=CREDENTIALS)
            self.sqs = self.clients.sqs
            stamp_sends(self.sqs)  # sends during an invocation carry its lineage, as in Lambda
            self.dynamodb = self.clients.dynamodb
            if self._template is not None:
                self._deploy_template(self._template)
            else:
                self.queue_urls.update(provision_queues(self.sqs, self.declaration))
                provision_table(self.dynamodb, self.declaration)
            # The same composition root as an app's and a runner Lambda's: only
            # the clients point at the emulated AWS, and push does not sleep
            # between tries.
            self.wiring = Wiring(
                self.declaration, clients=self.clients, clock=self.clock, queue_urls=self.queue_urls, sleep=_no_sleep
            )
            self._add_code_dir()
            self._wire_runners()
            self.scheduler = LocalScheduler(self.declaration.schedules, self._send_scheduled, self.clock.now())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self._exit.close()

    def _start_aws(self) -> None:
        self._exit.enter_context(indexed_queues())
        self._exit.enter_context(memoised_moto())
        self._exit.enter_context(faster_receives())
        self._exit.enter_context(serial_dynamodb())
        self._exit.enter_context(aws_visibility_limit())
        self._exit.enter_context(sqs_rules())
        self._exit.enter_context(dynamodb_rules())
        self._exit.enter_context(partition_queries())
        self._exit.enter_context(lambda_control_plane())
        self._exit.enter_context(cloudwatch_percentiles())
        if self._publish_metrics:
            self._exit.enter_context(counting_sends(self._sent))
        if isinstance(self.clock, VirtualClock):
            self._exit.enter_context(moto_on_clock(self.clock))
        if self._server_wanted:
            wrap = self._push_route if self.declaration.push_endpoint is not None else None
            self.endpoint_url = self._exit.enter_context(serving_aws(self._host, self._port, wrap=wrap))
        else:
            from moto import mock_aws

            mock = mock_aws()
            mock.start()
            self._exit.callback(mock.stop)

    def _add_code_dir(self) -> None:
        code_dir = self.declaration.code_dir
        if code_dir is not None and str(code_dir.resolve()) not in sys.path:
            path = str(code_dir.resolve())
            sys.path.insert(0, path)
            self._exit.callback(_remove_from_path, path)

    def _deploy_template(self, path: Path) -> None:
        from jobkit.local.cloudformation import deploy, load_template
        from jobkit.resources import PREFIX_PARAMETER

        stack = deploy(
            self.client,
            load_template(path),
            stack_name=self.declaration.names.local_stack,
            parameters={PREFIX_PARAMETER: self.declaration.prefix},
            region=self.region,
            base_dir=path.parent,
        )
        self.stack_outputs = stack.outputs
        for queue in self.declaration.queues:
            # by name: a queue in a nested stack has no output in the root
            for name in (self.declaration.queue_name(queue), self.declaration.dlq_name(queue)):
                self.queue_urls[name] = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
            runner = self.declaration.names.runner(queue)
            told = self._recursive_loop.get(queue)
            if isinstance(told, str):  # as if put after the deploy
                self.client("lambda").put_function_recursion_config(FunctionName=runner, RecursiveLoop=told)
            # the function's setting as it is when a batch comes (PutFunctionRecursionConfig changes it)
            self._recursive_loop[queue] = functools.partial(recursion_setting, runner, ACCOUNT_ID, self.region)

    def client(self, service: str) -> Any:
        """A boto3 client for the emulated AWS (one per service)."""
        return self.clients.client(service)

    # -- jobkit objects ------------------------------------------------------------

    def queue_group(self, domain: str | None = None) -> JobQueueGroup:
        """The push SDK, wired to the local queues, as an app gets it. Groups share one client."""
        return self.wiring.group(domain)

    @property
    def records(self) -> Records:
        """The jobs table."""
        return self.wiring.records

    def dedup_store(self) -> DedupStore:
        """A records store on the local table, with its own root cache (one per "container")."""
        return self.wiring.store()

    @functools.cached_property
    def push_endpoint(self) -> PushEndpoint:
        """The HTTP push endpoint (``[push_endpoint]``), as its Lambda function builds it, on the local queues."""
        from jobkit.endpoint.service import PushEndpoint
        from jobkit.local.push_route import LOCAL_HMAC_KEY

        own = Wiring(
            self.declaration.for_endpoint(), clients=self.clients, clock=self.clock, queue_urls=self.queue_urls
        )
        options = self.declaration.push_endpoint
        key = (lambda: LOCAL_HMAC_KEY) if options is not None and options.auth == "hmac" else None
        return PushEndpoint(own.declaration, own.group, self.clock, key)

    def _push_route(self, app: Any) -> Any:
        from jobkit.local.push_route import PushRoute

        options = self.declaration.push_endpoint
        iam = options is not None and options.auth == "iam"
        return PushRoute(app, lambda: self.push_endpoint, iam=iam, region=self.region)

    def queue_arn(self, queue: str, *, dlq: bool = False) -> str:
        """The ARN of a declared queue (or of its DLQ)."""
        name = self.declaration.dlq_name(queue) if dlq else self.declaration.queue_name(queue)
        return f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}"

    def queue_url(self, queue: str, *, dlq: bool = False) -> str:
        """The URL of a declared queue (or of its DLQ)."""
        return self.queue_urls[self.declaration.dlq_name(queue) if dlq else self.declaration.queue_name(queue)]

    def _wire_runners(self) -> None:
        import random

        from jobkit.metrics import EmfMetrics

        sinks: list[Any] = [self.results, *self._sinks]
        if self._emf_stream is not None:
            sinks.append(EmfMetrics(self.declaration.namespace, self._emf_stream))
        if self._publish_metrics:
            self.metrics_publisher = MetricsPublisher(
                self.client("cloudwatch"),
                self.declaration,
                self.clock,
                self._sent,
                account_id=ACCOUNT_ID,
                region=self.region,
            )
            sinks.append(self.metrics_publisher)
        metrics = Tee(*sinks)

        for queue, config in self.declaration.queues.items():
            # Each runner knows only its queue's types and those they push, as deployed.
            def container(queue: str = queue) -> Runner:
                rng = random.Random(self._seed)
                return self.wiring.runner(queue, metrics=metrics, registry=self._registry, rng=rng)

            containers = Containers(container)
            self.runners[queue] = containers.first
            name = self.declaration.queue_name(queue)
            self.mappings[queue] = EventSourceMapping(
                self.sqs,
                self.queue_url(queue),
                self.queue_arn(queue),
                containers.handle,
                batch_size=config.batch_size,
                function_name=self.declaration.names.runner(queue),
                timeout_s=config.timeout_s,
                memory_mb=config.memory_mb,
                clock=self.clock,
                region=self.region,
                receivable=functools.partial(self._receivable, name),
                recursion=RecursionGuard(
                    self.declaration.names.runner(queue), self._recursive_loop.get(queue, RUNNER_RECURSIVE_LOOP)
                ),
            )

    def _send_scheduled(self, job_type: str, body: str) -> None:
        """A schedule's firing, sent as EventBridge Scheduler sends it: the body alone."""
        queue = self.declaration.types[job_type].queue
        self.sqs.send_message(QueueUrl=self.queue_url(queue), MessageBody=body)

    def _receivable(self, name: str) -> bool:
        return has_receivable(ACCOUNT_ID, self.region, name, self.clock.now())

    # -- running -------------------------------------------------------------------

    def poll_once(self) -> int:
        """One round of polling; returns the number of records delivered.

        Each queue gets up to its ``max_concurrency`` batches per round, taken
        in turns, so a queue with more concurrency (enotifNotify's 20 against
        the default 8) gets through its messages faster while a backlog drains
        elsewhere: the nearest a single process comes to Lambda running each
        queue's batches in parallel. Queues with nothing to receive are skipped
        without a request, as Lambda's long polling costs no time either.
        With ``publish_metrics``, a round publishes them when they are due.
        """
        if self.metrics_publisher is not None:
            self.metrics_publisher.tick()
        if self.scheduler is not None:
            self.scheduler.fire_due(self.clock.now())
        delivered = 0
        concurrency = {queue: config.max_concurrency for queue, config in self.declaration.queues.items()}
        for slot in range(max(concurrency.values(), default=0)):
            for queue, mapping in self.mappings.items():
                if slot < concurrency[queue]:
                    delivered += mapping.poll()  # a queue with nothing to receive costs no request
        return delivered

    def drain(
        self,
        *,
        until: float | None = None,
        max_polls: int = 1_000_000,
        on_poll: Callable[[int], None] | None = None,
        parallel: bool = False,
        timeout_s: float | None = None,
    ) -> int:
        """Run jobs until every queue is empty, or until the clock reaches ``until``.

        Idle waits (backoffs, delays) are skipped on a virtual clock and slept
        through on a real one. ``on_poll`` gets the running count of delivered
        records after every round (for progress displays). Returns the number
        of records delivered.

        With ``parallel``, each queue runs up to its ``max_concurrency`` batches
        at once in virtual time, as on Lambda (see :mod:`jobkit.local.fleet`);
        that needs a frozen :class:`VirtualClock`.

        Raises:
            RuntimeError: after ``max_polls`` rounds, or ``timeout_s`` real
                seconds, with jobs still queued.
        """
        if parallel:
            return self._fleet().run(until, on_poll)
        delivered = 0
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for _ in range(max_polls):
            if deadline is not None and time.monotonic() > deadline:
                raise RuntimeError(f"drain did not finish within {timeout_s} s ({delivered} records delivered)")
            if until is not None and self.clock.now() >= until:
                break
            batch = self.poll_once()
            delivered += batch
            if on_poll is not None:
                on_poll(delivered)
            if batch:
                continue
            wake = self.next_wakeup()
            if until is not None and self.scheduler is not None:  # schedules fire forever: only up to `until`
                due = self.scheduler.next_due()
                wake = due if wake is None or (due is not None and due < wake) else wake
            if wake is None or (until is not None and wake > until):
                break
            self._wait_until(wake)
        else:
            raise RuntimeError(f"drain did not finish within {max_polls} polls")
        if until is not None and isinstance(self.clock, VirtualClock):
            self.clock.advance_to(until)
        return delivered

    def _fleet(self) -> Fleet:
        clock = self.clock
        if not isinstance(clock, VirtualClock) or clock.flowing:
            raise ValueError("a parallel drain needs a frozen VirtualClock")
        return Fleet(
            clock,
            self.mappings,
            {queue: config.max_concurrency for queue, config in self.declaration.queues.items()},
            lambda queue: self._receivable(self.declaration.queue_name(queue)),
            self.next_wakeup,
        )

    def _wait_until(self, when: float) -> None:
        # moto compares "now > visible_at" strictly, in milliseconds.
        target = when + 0.002
        if isinstance(self.clock, VirtualClock):
            self.clock.advance_to(target)
        else:
            time.sleep(max(0.0, target - self.clock.now()))

    def next_wakeup(self) -> float | None:
        """When the next hidden or delayed message in a jobkit queue becomes visible."""
        names = [self.declaration.queue_name(queue) for queue in self.declaration.queues]
        return next_visible_at(ACCOUNT_ID, self.region, names, self.clock.now())

    # -- looking ---------------------------------------------------------------------

    def queue_depth(self, queue: str, *, dlq: bool = False) -> int:
        """Messages in a queue or its DLQ: visible, in flight and delayed."""
        name = self.declaration.dlq_name(queue) if dlq else self.declaration.queue_name(queue)
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_urls[name],
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def dead_letters(self, queue: str) -> list[MessageTypeDef]:
        """The messages in a queue's DLQ (received and made visible again at once)."""
        url = self.queue_urls[self.declaration.dlq_name(queue)]
        receive = functools.partial(receive_messages, self.sqs, url, visibility_timeout_s=30)
        messages = [message for batch in new_messages(receive) for message in batch]
        for message in messages:
            self.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        return messages


def _no_sleep(_: float) -> None:
    """Push's wait between tries: the emulated AWS does not need one."""


def _remove_from_path(path: str) -> None:
    if path in sys.path:
        sys.path.remove(path)
