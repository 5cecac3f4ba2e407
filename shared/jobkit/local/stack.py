"""LocalStack: the whole jobkit stack on an embedded moto.

::

    with LocalStack(load_declaration(), clock=VirtualClock(flowing=True)) as stack:
        stack.queue_group("enwiki").push(JobSpecification("refreshLinks", {"title": "Main Page"}))
        stack.drain()

Queues, DLQs and the table are created from the declaration. Each queue gets
its own :class:`~jobkit.runner.Runner` (its own "container") fed by an
:class:`~jobkit.local.esm.EventSourceMapping` emulator. With a
:class:`~jobkit.core.clock.VirtualClock`, moto's clock is the same clock, and
:meth:`LocalStack.drain` skips idle waits (backoffs, delays) instead of sleeping.
moto's queues are indexed (:mod:`jobkit.local.moto_patches`), so pushing and
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
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from jobkit.core.clock import Clock, SystemClock, VirtualClock
from jobkit.core.resources import RUNNER_RECURSIVE_LOOP
from jobkit.declaration.config import Declaration
from jobkit.dedup.store import DedupStore
from jobkit.local.esm import EventSourceMapping
from jobkit.local.moto_patches import SentCounts, patched_moto
from jobkit.local.provision import provision_bucket, provision_queues, provision_table
from jobkit.local.recursion import stamp_sends
from jobkit.local.results import MetricsPublisher, ResultLog
from jobkit.local.running import Running
from jobkit.local.scheduler import LocalScheduler
from jobkit.local.server import serving_aws
from jobkit.push import JobQueueGroup
from jobkit.records.journal import AttemptJournal
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


class LocalStack(Running):
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
        self.account_id = ACCOUNT_ID
        self.clock = clock or SystemClock()
        self.region = region
        self.results = ResultLog()
        #: Held while a round of batches runs (``jobkit local up``), so the clock moves between rounds only
        self.batch_lock = threading.Lock()
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
        #: the payload bucket's name (the params of jobs too large for a message)
        self.payload_bucket: str | None = None
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
            self.clients = AwsClients(
                region=self.region, endpoint_url=self.endpoint_url, credentials=CREDENTIALS, own_endpoints=True
            )
            self.sqs = self.clients.sqs
            stamp_sends(self.sqs)  # sends during an invocation carry its lineage, as in Lambda
            self.dynamodb = self.clients.dynamodb
            if self._template is not None:
                self._deploy_template(self._template)
            else:
                self.queue_urls.update(provision_queues(self.sqs, self.declaration))
                provision_table(self.dynamodb, self.declaration)
                self.payload_bucket = provision_bucket(self.clients.client("s3"), self.declaration, self.region)
            # The same composition root as an app's and a runner Lambda's: only
            # the clients point at the emulated AWS, and push does not sleep
            # between tries.
            self.wiring = Wiring(
                self.declaration,
                clients=self.clients,
                clock=self.clock,
                queue_urls=self.queue_urls,
                sleep=_no_sleep,
                payload_bucket=self.payload_bucket,
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
        clock = self.clock if isinstance(self.clock, VirtualClock) else None
        self._exit.enter_context(patched_moto(clock=clock, sent=self._sent if self._publish_metrics else None))
        if self._server_wanted:
            self.endpoint_url = self._exit.enter_context(serving_aws(self._host, self._port, wrap=self._routes))
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
        from jobkit.local.provision import deploy_template

        deployed = deploy_template(self.client, self.declaration, path, region=self.region, account_id=ACCOUNT_ID)
        self.stack_outputs = deployed.outputs
        self.queue_urls.update(deployed.queue_urls)
        self.payload_bucket = deployed.outputs.get("PayloadBucketName")
        for queue, told in list(self._recursive_loop.items()):
            if isinstance(told, str):  # as if put after the deploy
                runner = self.declaration.names.runner(queue)
                self.client("lambda").put_function_recursion_config(FunctionName=runner, RecursiveLoop=told)
        self._recursive_loop.update(deployed.recursive_loop)

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
        """A de-duplication store on the local table, with its own root cache (one per "container")."""
        return self.wiring.store()

    def journal(self) -> AttemptJournal:
        """The runners' journal of attempts on the local table (failure records, final attempts)."""
        return self.wiring.journal()

    @functools.cached_property
    def push_endpoint(self) -> PushEndpoint:
        """The HTTP push endpoint (``[push_endpoint]``), as its Lambda function builds it, on the local queues."""
        from jobkit.endpoint.service import PushEndpoint
        from jobkit.local.push_route import LOCAL_HMAC_KEY

        own = Wiring(
            self.declaration.for_endpoint(),
            clients=self.clients,
            clock=self.clock,
            queue_urls=self.queue_urls,
            payload_bucket=self.payload_bucket,
        )
        options = self.declaration.push_endpoint
        key = (lambda: LOCAL_HMAC_KEY) if options is not None and options.auth == "hmac" else None
        # signatures are checked against the wall clock, as SigV4's: `jobkit local advance` moves only the stack's
        wall = SystemClock() if isinstance(self.clock, VirtualClock) and self.clock.flowing else None
        return PushEndpoint(own.declaration, own.group, self.clock, key, wall)

    def _routes(self, app: Any) -> Any:
        """jobkit's own routes in front of moto: the stack's identity, and the push endpoint if declared."""
        from jobkit.local.identity import IdentityRoute
        from jobkit.ops.local_endpoint import LocalStackIdentity

        if self.declaration.push_endpoint is not None:
            app = self._push_route(app)

        def identity() -> LocalStackIdentity:
            keys = CREDENTIALS["aws_access_key_id"], CREDENTIALS["aws_secret_access_key"]
            return LocalStackIdentity(self.region, *keys, now=self.clock.now())

        advance = self._advance_clock if isinstance(self.clock, VirtualClock) else None
        return IdentityRoute(app, identity, advance)

    def _advance_clock(self, seconds: float) -> float:
        """Move the stack's (virtual) clock forward: delays, backoffs and schedules come due."""
        assert isinstance(self.clock, VirtualClock)
        with self.batch_lock:  # never under a running job: its run time and deadline stay its own
            self.clock.advance(seconds)
            return self.clock.now()

    def _push_route(self, app: Any) -> Any:
        from jobkit.local.push_route import PushRoute

        options = self.declaration.push_endpoint
        iam = options is not None and options.auth == "iam"
        return PushRoute(app, lambda: self.push_endpoint, iam=iam, region=self.region)

    def queue_arn(self, queue: str, *, dlq: bool = False) -> str:
        """The ARN of a declared queue (or of its DLQ); a lane's by its key (``render-high``)."""
        name = self.declaration.dlq_name(queue) if dlq else self.declaration.queue_name(queue)
        return f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}"

    def queue_url(self, queue: str, *, dlq: bool = False) -> str:
        """The URL of a declared queue (or of its DLQ); a lane's by its key (``render-high``)."""
        return self.queue_urls[self.declaration.dlq_name(queue) if dlq else self.declaration.queue_name(queue)]

    def _wire_runners(self) -> None:
        from jobkit.local.functions import RunnerFunctions

        if self._publish_metrics:
            self.metrics_publisher = MetricsPublisher(
                self.client("cloudwatch"),
                self.declaration,
                self.clock,
                self._sent,
                account_id=ACCOUNT_ID,
                region=self.region,
            )
        sinks = [self.results, *self._sinks]
        if self._emf_stream is not None:
            from jobkit.core.metrics import EmfMetrics

            sinks.append(EmfMetrics(self.declaration.namespace, self._emf_stream))
        if self.metrics_publisher is not None:
            sinks.append(self.metrics_publisher)
        functions = RunnerFunctions(self.wiring, self.sqs, self.region, self.clock, sinks)
        for queue, config in self.declaration.queues.items():
            lanes = {lane.key: (self.queue_url(lane.key), self.queue_arn(lane.key)) for lane in config.lanes}
            self.runners[queue], mappings = functions.deploy(
                queue,
                lanes,
                receivable=lambda key: self._receivable(self.declaration.queue_name(key)),
                recursive_loop=self._recursive_loop.get(queue, RUNNER_RECURSIVE_LOOP),
                registry=self._registry,
                seed=self._seed,
            )
            self.mappings.update(mappings)  # by lane: a queue's own lane by the queue's name

    def _send_scheduled(self, job_type: str, body: str) -> None:
        """A schedule's firing, sent as EventBridge Scheduler sends it: the body alone."""
        queue = self.declaration.types[job_type].queue
        self.sqs.send_message(QueueUrl=self.queue_url(queue), MessageBody=body)

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
