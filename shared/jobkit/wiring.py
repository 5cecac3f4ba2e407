"""The composition root: the one place that builds jobkit's objects.

Apps (:func:`queue_group`), runner Lambdas, the local stack, the
pytest plugin and the CLI all get their AWS clients, records store, queue
directory, push groups and runners from a :class:`Wiring`, so a test builds
them exactly the way production does. Only :class:`AwsClients` creates boto3
clients, and only on first use: importing this module, or building a
``Wiring``, makes no request and loads no AWS SDK.

::

    wiring = Wiring.from_environment()           # an app, or a runner Lambda
    wiring.group("enwiki").push(spec)
    runner = wiring.runner("refreshLinks")       # what a runner Lambda runs
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from jobkit.core.clock import Clock, SystemClock
from jobkit.core.errors import ConfigError, NoRegion
from jobkit.declaration.config import Declaration, declaration_from_environment
from jobkit.dedup.store import DedupStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient

    from jobkit.payloads.store import PayloadStore
    from jobkit.push import JobQueueGroup
    from jobkit.records.journal import AttemptJournal
    from jobkit.records.store import Records
    from jobkit.runner import MetricsPort, Runner
    from jobkit.runner.registry import JobRegistry
    from jobkit.sqs import QueueDirectory


class AwsClients:
    """AWS clients (botocore's, which boto3's are), one per service, built on first use.

    Args:
        region: the region (default: ``AWS_REGION``, which Lambda and the other
            AWS SDKs and the AWS CLI read first, then botocore's chain:
            ``AWS_DEFAULT_REGION``, the profile; botocore alone does not read
            ``AWS_REGION``).
        endpoint_url: another endpoint than AWS's (the local stack).
        credentials: explicit credentials (``aws_access_key_id`` and so on).
        clients: clients built elsewhere, by service name (tests that count requests).
        own_endpoints: ignore the endpoints the environment configures
            (``$AWS_ENDPOINT_URL``...): the local stack's clients talk to it alone.
    """

    #: Few, quick DynamoDB retries: the records store fails open, so waiting long
    #: for a throttled table only delays the job.
    _CONFIGS: Mapping[str, Mapping[str, Any]] = {
        # room for the claims a batch sends at once (jobkit.core.parallel), and the runner's own requests
        "dynamodb": {
            "retries": {"mode": "standard", "max_attempts": 2},
            "connect_timeout": 2,
            "read_timeout": 2,
            "max_pool_connections": 12,
        },
        # a stalled fetch must not take a batch's whole timeout (a read timeout is per read, not per object)
        "s3": {"retries": {"mode": "standard", "max_attempts": 3}, "connect_timeout": 2, "read_timeout": 10},
    }
    _DEFAULT_CONFIG: Mapping[str, Any] = {"retries": {"mode": "standard", "max_attempts": 3}}

    def __init__(
        self,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        credentials: Mapping[str, str] | None = None,
        clients: Mapping[str, Any] | None = None,
        own_endpoints: bool = False,
    ) -> None:
        self.region = region
        self.endpoint_url = endpoint_url
        self._own_endpoints = own_endpoints
        self._credentials = dict(credentials or {})
        self._clients: dict[str, Any] = dict(clients or {})
        self._botocore_session: Any = None
        self._lock = threading.Lock()

    def client(self, service: str) -> Any:
        """The client of ``service``, made on first use.

        Made with botocore, which boto3's clients are: ``import boto3`` also
        loads s3transfer and its multiprocessing and concurrency modules (about
        65 ms of a cold start) for S3 features that no jobkit process uses.
        """
        with self._lock:
            if service not in self._clients:
                from botocore.config import Config

                self._clients[service] = self._session().create_client(
                    service,
                    region_name=self.region_name(),
                    endpoint_url=self.endpoint_url,
                    config=Config(**self._config(service)),
                    **self._credentials,
                )
            return self._clients[service]

    def _config(self, service: str) -> dict[str, Any]:
        options = dict(self._CONFIGS.get(service, self._DEFAULT_CONFIG))
        if self._own_endpoints:  # the local stack's clients go where it says, never to an $AWS_ENDPOINT_URL
            options["ignore_configured_endpoint_urls"] = True
            if service == "s3":  # (its buckets are paths of its one host)
                options["s3"] = {"addressing_style": "path"}
        return options

    def region_name(self) -> str:
        """The Region: the one given, else ``AWS_REGION``, else
        ``AWS_DEFAULT_REGION``, else the profile's (raises :class:`NoRegion`
        saying so when none of them names one)."""
        region = (self.region or os.environ.get("AWS_REGION") or "").strip()
        if region:
            return region
        session = self._session()
        region = str(session.get_config_variable("region") or "").strip()  # AWS_DEFAULT_REGION, then the profile
        if region:
            return region
        raise NoRegion(_where_regions_were_looked_for(session))

    def _session(self) -> Any:
        if self._botocore_session is None:
            import botocore.session

            self._botocore_session = botocore.session.get_session()
        return self._botocore_session

    def lazy(self, service: str) -> Any:
        """A stand-in for the client of ``service`` that makes it on its first
        call: a runner whose jobs all succeed never makes its SQS client, and
        a cold start does not wait for one."""
        return _LazyClient(self, service)

    @property
    def sqs(self) -> SQSClient:
        return cast("SQSClient", self.client("sqs"))

    @property
    def dynamodb(self) -> DynamoDBClient:
        return cast("DynamoDBClient", self.client("dynamodb"))


class _LazyClient:
    """The client of one service, made when it is first used (see :meth:`AwsClients.lazy`)."""

    __slots__ = ("_clients", "_service")

    def __init__(self, clients: AwsClients, service: str) -> None:
        self._clients = clients
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clients.client(self._service), name)


class Wiring:
    """Builds what a process needs from a declaration and its clients.

    Args:
        declaration: the job types (a runner Lambda gets only its own and the ones they push).
        clients: where AWS is (default: boto3's own chain).
        clock: the time source.
        queue_urls: SQS queue name -> URL, to skip GetQueueUrl (the deployed stack sets these).
        sleep: how push waits between tries.
    """

    def __init__(
        self,
        declaration: Declaration,
        *,
        clients: AwsClients | None = None,
        clock: Clock | None = None,
        queue_urls: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        payload_bucket: str | None = None,
    ) -> None:
        self.declaration = declaration
        self.clients = clients or AwsClients()
        self.clock = clock or SystemClock()
        self.queue_urls = dict(queue_urls or {})
        self.payload_bucket = payload_bucket
        self._sleep = sleep
        self._group: JobQueueGroup | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Wiring:
        """What an app or a runner Lambda is configured with: the declaration
        (``JOBKIT_DECLARATION`` or ``JOBKIT_CONFIG``, and ``JOBKIT_PREFIX``),
        the queue URLs the deployed stack passes (``JOBKIT_QUEUE_URLS``) and
        its payload bucket (``JOBKIT_PAYLOAD_BUCKET``, the stack's output)."""
        import json

        environ = os.environ if environ is None else environ
        try:
            queue_urls = json.loads(environ.get("JOBKIT_QUEUE_URLS", "{}"))
        except ValueError as exc:
            raise ConfigError("$JOBKIT_QUEUE_URLS", "", f"not valid JSON: {exc}") from exc
        bucket = environ.get("JOBKIT_PAYLOAD_BUCKET") or None
        return cls(declaration_from_environment(environ), queue_urls=queue_urls, payload_bucket=bucket)

    # -- the jobs table --------------------------------------------------------------

    @cached_property
    def records(self) -> Records:
        """The jobs table (its client is made on the first request)."""
        from jobkit.records.dynamodb import DynamoDBTable
        from jobkit.records.store import Records

        clients = self.clients
        return Records(DynamoDBTable(None, self.declaration.table_name, connect=lambda: clients.dynamodb))

    def store(self) -> DedupStore:
        """A de-duplication store with a root cache of its own: one per container."""
        return DedupStore(self.records, clock=self.clock)

    def journal(self) -> AttemptJournal:
        """The runners' journal of attempts (failure records, final attempts, deferrals)."""
        from jobkit.records.journal import AttemptJournal

        return AttemptJournal(self.records, clock=self.clock)

    @cached_property
    def payloads(self) -> PayloadStore | None:
        """The payload bucket, where the params of jobs too large for a message go (None: no bucket)."""
        if self.payload_bucket is None:
            return None
        from jobkit.payloads.store import PayloadStore

        return PayloadStore(self.clients.lazy("s3"), self.payload_bucket)

    # -- queues ------------------------------------------------------------------------

    @cached_property
    def directory(self) -> QueueDirectory:
        from jobkit.sqs import QueueDirectory

        return QueueDirectory(self.clients.lazy("sqs"), self.declaration, self.queue_urls)

    def group(self, domain: str | None = None, *, store: DedupStore | None = None) -> JobQueueGroup:
        """The push SDK for a domain. Groups share one SQS client and one store,
        which records the root jobs they push (failing open, with a warning)."""

        with self._lock:
            if self._group is None:
                self._group = self._new_group(store or self.store())
        return self._group.for_domain(domain)

    def _new_group(self, store: DedupStore) -> JobQueueGroup:
        from jobkit.push import JobQueueGroup

        return JobQueueGroup(
            None,
            declaration=self.declaration,
            sqs_client_factory=lambda: self.clients.sqs,
            queue_urls=self.queue_urls,
            dedup_store=store.roots,
            records=store.records,
            clock=self.clock,
            sleep=self._sleep,
            payloads=self.payloads,
        )

    # -- runners -------------------------------------------------------------------------

    def runner(
        self,
        queue: str,
        *,
        metrics: MetricsPort | None = None,
        registry: JobRegistry | None = None,
        rng: random.Random | None = None,
    ) -> Runner:
        """The runner of one queue, as its Lambda container builds it: it knows
        only its queue's types and the types they push, has a store (and root
        cache) of its own, and pushes through a group that shares that store."""
        from jobkit.runner import Runner
        from jobkit.sqs import SqsQueues

        if queue not in self.declaration.queues:
            raise ConfigError(
                self.declaration.source, "", f"no queue {queue!r} (queues: {', '.join(self.declaration.queues)})"
            )
        own = Wiring(
            self.declaration.for_runner(queue),
            clients=self.clients,
            clock=self.clock,
            queue_urls=self.queue_urls,
            sleep=self._sleep,
            payload_bucket=self.payload_bucket,
        )
        store = own.store()
        groups: list[JobQueueGroup] = []

        def group_for(domain: str | None) -> JobQueueGroup:
            # made when a job first pushes: a runner whose jobs push nothing never imports the push SDK
            if not groups:
                groups.append(own._new_group(store))
            return groups[0].for_domain(domain)

        return Runner(
            own.declaration,
            queue=queue,
            queues=SqsQueues(self.clients.lazy("sqs"), own.directory, queue),
            records=own.records,
            dedup=store,
            group_factory=group_for,
            metrics=metrics,
            clock=self.clock,
            registry=registry,
            rng=rng,
            payloads=own.payloads,
        )


# -- the process-wide default groups ------------------------------------------------------

_default_group: JobQueueGroup | None = None
_default_group_lock = threading.Lock()


def queue_group(domain: str | None = None) -> JobQueueGroup:
    """The push SDK for a domain, as an app gets it: ``jobkit.queue_group("enwiki").push(spec)``.

    The first call builds the process's group from the environment
    (:meth:`Wiring.from_environment`); the groups of every domain share its
    SQS client, its queue URLs and its store.
    """
    global _default_group
    with _default_group_lock:
        if _default_group is None:
            _default_group = Wiring.from_environment().group()
        root = _default_group
    return root.for_domain(domain)


def reset_default_groups() -> None:
    """Forget the process-wide default group (tests, or after changing the environment)."""
    global _default_group
    with _default_group_lock:
        _default_group = None


def _where_regions_were_looked_for(session: Any) -> str:
    """What AWS_REGION, AWS_DEFAULT_REGION and the profile held, for :class:`NoRegion`."""

    def variable(name: str) -> str:
        value = os.environ.get(name)
        return f"{name} is unset" if value is None else f"{name} is empty"

    default = variable("AWS_DEFAULT_REGION")
    if "AWS_DEFAULT_REGION" in os.environ:
        return f"{variable('AWS_REGION')}, and {default} (which hides any region in the AWS config file)"
    profile = session.get_config_variable("profile") or "default"
    config = os.path.expanduser(str(session.get_config_variable("config_file") or "~/.aws/config"))
    where = f"names none in {config}" if os.path.exists(config) else f"has no config file ({config} does not exist)"
    return f"{variable('AWS_REGION')}, {default}, and the AWS profile {profile!r} {where}"
