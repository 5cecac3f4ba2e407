"""Where an ops command looks, and the objects it uses.

Everything is built on first use by the composition root that apps and
runners use too (:mod:`jobkit.wiring`): the CLI creates no client of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock, SystemClock, VirtualClock
from jobkit.declaration.config import Declaration, declaration_from_environment, load_declaration

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_sqs import SQSClient

    from jobkit.ops.local_endpoint import LocalStackIdentity
    from jobkit.payloads.store import PayloadStore
    from jobkit.push import JobQueueGroup
    from jobkit.records.store import Records
    from jobkit.sqs import QueueDirectory
    from jobkit.wiring import AwsClients, Wiring


@dataclass
class CliConfig:
    """Where the commands look, and the objects they use, built on first use
    by the same composition root as apps and runners (:mod:`jobkit.wiring`).

    Tests (and embedders) may pass one as click's ``obj`` to set the clock;
    command-line options override its other fields (:meth:`overridden`).
    """

    config_path: Path | None = None
    prefix: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    clock: Clock = field(default_factory=SystemClock)
    _clients: AwsClients | None = field(default=None, repr=False)
    _wiring: Wiring | None = field(default=None, repr=False)
    _local: LocalStackIdentity | None = field(default=None, repr=False)
    _probed: bool = field(default=False, repr=False)

    def overridden(
        self, *, config_path: Path | None, prefix: str | None, endpoint_url: str | None, region: str | None
    ) -> CliConfig:
        """A config with the options given on the command line, this one's
        where an option was not given, and nothing built yet."""
        return CliConfig(
            config_path=config_path or self.config_path,
            prefix=prefix or self.prefix,
            endpoint_url=endpoint_url or self.endpoint_url,
            region=region or self.region,
            clock=self.clock,
        )

    @property
    def declaration(self) -> Declaration:
        return self.wiring.declaration

    @property
    def clients(self) -> AwsClients:
        if self._clients is None:
            from jobkit.wiring import AwsClients

            region, credentials = self.region, None
            local = self.local_stack
            if local is not None:  # its region and dummy credentials, unless given
                region = region or local.region
                if not (os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY")):
                    credentials = {
                        "aws_access_key_id": local.access_key_id,
                        "aws_secret_access_key": local.secret_access_key,
                    }
            self._clients = AwsClients(region=region, endpoint_url=self.endpoint_url, credentials=credentials)
        return self._clients

    @property
    def local_stack(self) -> LocalStackIdentity | None:
        """What ``jobkit local up`` at the endpoint says of itself, if the
        endpoint is one (asked once). Its clock becomes the commands' clock,
        unless one was given: ``jobkit local advance`` may have moved it."""
        if not self._probed:
            self._probed = True
            endpoint = self.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
            if endpoint:
                from jobkit.ops.local_endpoint import identify

                self._local = identify(endpoint)
                if self._local is not None and self._local.now is not None and isinstance(self.clock, SystemClock):
                    self.clock = VirtualClock(self._local.now, flowing=True)
        return self._local

    @property
    def wiring(self) -> Wiring:
        if self._wiring is None:
            from jobkit.wiring import Wiring

            clients = self.clients  # first: the local stack's clock, if the endpoint is one
            declaration = load_declaration(self.config_path) if self.config_path else declaration_from_environment()
            declaration = declaration.with_prefix(self.prefix) if self.prefix else declaration
            self._wiring = Wiring(
                declaration, clients=clients, clock=self.clock, payload_bucket=self._bucket(declaration)
            )
        return self._wiring

    def _bucket(self, declaration: Declaration) -> str | None:
        """The payload bucket: ``$JOBKIT_PAYLOAD_BUCKET`` (the stack's output), or the local stack's."""
        if os.environ.get("JOBKIT_PAYLOAD_BUCKET"):
            return os.environ["JOBKIT_PAYLOAD_BUCKET"]
        if self.local_stack is not None:
            from jobkit.template.payload_bucket import local_bucket_name

            return local_bucket_name(declaration.prefix)
        return None

    @property
    def sqs(self) -> SQSClient:
        """The SQS client, one per config."""
        client: SQSClient = self.clients.client("sqs")
        return client

    @property
    def cloudwatch(self) -> CloudWatchClient:
        """The CloudWatch client, one per config."""
        client: CloudWatchClient = self.clients.client("cloudwatch")
        return client

    @property
    def logs(self) -> Any:
        """The CloudWatch Logs client, one per config (read only where CloudWatch
        cannot report on the logs itself: ``jobkit top --by domain`` on an emulator)."""
        return self.clients.client("logs")

    @property
    def directory(self) -> QueueDirectory:
        return self.wiring.directory

    @property
    def records(self) -> Records:
        """The jobs table: failure and status records."""
        return self.wiring.records

    @property
    def payloads(self) -> PayloadStore | None:
        """The payload bucket (None: none configured), for a large dead letter's params."""
        return self.wiring.payloads

    def queue_group(self) -> JobQueueGroup:
        return self.wiring.group()

    def now(self) -> float:
        self.local_stack  # noqa: B018 - the local stack's clock, if the endpoint is one
        return self.clock.now()
