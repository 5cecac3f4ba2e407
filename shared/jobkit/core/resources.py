"""Settings of the deployed resources that the template and the local stack share,
and their names (:class:`ResourceNames`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from jobkit.core.errors import ConfigError

#: How long a dead letter is kept: the SQS maximum, 14 days.
DLQ_RETENTION_S = 14 * 24 * 3600
#: How long a queued job is kept: 4 days, the SQS default.
QUEUE_RETENTION_S = 4 * 24 * 3600
#: The jobs table's key attributes (both strings) and its TTL attribute.
TABLE_KEYS = ("pk", "sk")
TTL_ATTRIBUTE = "expires_at"
#: The runners' Lambda runtime and architecture, for which the layer is built.
#: (python3.11 runs on Amazon Linux 2, which Lambda deprecated on 2026-06-30.)
RUNTIME = "python3.12"
ARCHITECTURE = "arm64"
#: The runner functions' handler, in the jobkit layer; their own code is the app's job package.
HANDLER = "jobkit.handler.handler"
#: Lambda's recursive loop detection for the runners. jobkit chains SQS sends
#: on purpose (a delay over 15 minutes hops every 900 s, a recursive fan-out
#: pushes its remnant to its own queue, deferrals, holds and debounce waits
#: re-send a job), and with Lambda's default, ``Terminate``, such a chain stops
#: at about its 16th round: the message reaches the DLQ through the redrive
#: policy with no reason. Each chain ends by itself (a release time, a fan-out's
#: last page, ``max_held_s``), and every re-send counts toward a limit.
RUNNER_RECURSIVE_LOOP = "Allow"

#: The name prefix of a deployment (a stage), which starts every resource name, and what it may be.
DEFAULT_PREFIX = "jobkit"
PREFIX_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,15}$")
#: The template parameter that holds the prefix.
PREFIX_PARAMETER = "Prefix"


@dataclass(frozen=True, slots=True)
class ResourceNames:
    """The names of a deployment's resources: the one place that knows the scheme.

    ``ResourceNames("jobkit").queue("refreshLinks")`` is ``"jobkit-refreshLinks"``.
    :meth:`sub` gives the same names for the template, as ``Fn::Sub`` strings on
    its ``Prefix`` parameter: ``ResourceNames.sub().queue("refreshLinks")`` is
    ``"${Prefix}-refreshLinks"``.
    """

    prefix: str

    @classmethod
    def sub(cls) -> ResourceNames:
        """The names as the template writes them, for ``Fn::Sub``."""
        return cls(f"${{{PREFIX_PARAMETER}}}")

    def queue(self, queue: str) -> str:
        """The SQS queue of a declared queue."""
        return f"{self.prefix}-{queue}"

    def dlq(self, queue: str) -> str:
        """The dead-letter queue of a declared queue."""
        return f"{self.queue(queue)}-dlq"

    @property
    def schedules_dlq(self) -> str:
        """Where EventBridge Scheduler puts a firing it could not send (a
        queue of its own: what it puts there is not a job)."""
        return f"{self.prefix}-schedules-dlq"

    def runner(self, queue: str) -> str:
        """The runner function (Lambda) of a declared queue."""
        return f"{self.prefix}-runner-{queue}"

    def log_group(self, queue: str) -> str:
        """The log group of a queue's runner function."""
        return f"/aws/lambda/{self.runner(queue)}"

    @property
    def table(self) -> str:
        """The DynamoDB table that holds dedup, root-job, failure and status records."""
        return f"{self.prefix}-jobs"

    @property
    def push_endpoint(self) -> str:
        """The HTTP push endpoint's function (Lambda)."""
        return f"{self.prefix}-push-endpoint"

    @property
    def producer_policy(self) -> str:
        """The managed policy an app's role attaches to push jobs."""
        return f"{self.prefix}-producer"

    @property
    def operator_policy(self) -> str:
        """The managed policy an operator's role attaches for `jobkit verify` and the ops commands."""
        return f"{self.prefix}-operator"

    @property
    def alarm_topic(self) -> str:
        """The SNS topic the alarms notify."""
        return f"{self.prefix}-alarms"

    @property
    def dashboard(self) -> str:
        """The CloudWatch dashboard."""
        return f"{self.prefix}-jobs"

    @property
    def runner_service(self) -> str:
        """The service name the runners log under."""
        return f"{self.prefix}-runner"

    @property
    def local_stack(self) -> str:
        """The CloudFormation stack the local stack deploys the template as."""
        return f"{self.prefix}-local"


def logical_id(name: str) -> str:
    """A CloudFormation logical ID from a queue, type or schedule name: alphanumeric, capitalised."""
    parts = re.split(r"[^A-Za-z0-9]+", name)
    return "".join(part[:1].upper() + part[1:] for part in parts if part)


#: The type of `jobkit verify`'s canary, which every runner serves (:mod:`jobkit.jobs.canary`):
#: reserved, no declared type may take it.
CANARY_TYPE = "jobkitCanary"
#: The type of a batch's check, which a runner of batch members sends itself when it could not
#: push a batch's callbacks (:mod:`jobkit.jobs.batch_check`): reserved too.
BATCH_CHECK_TYPE = "jobkitBatchCheck"
RESERVED_TYPES = (CANARY_TYPE, BATCH_CHECK_TYPE)

#: AWS's limits on the names jobkit gives its resources.
MAX_FUNCTION_NAME = 64  # Lambda
MAX_QUEUE_NAME = 80  # SQS
#: The longest prefix a stack may be deployed under (a stage may change the
#: declaration's own): names are checked with it.
LONGEST_PREFIX = "p" * 16


def refuse_names_aws_refuses(source: str, queues: Mapping[str, str]) -> None:
    """Refuse a queue whose resources AWS would refuse by name, under the
    longest prefix a stack may take: its runner function (64 characters), its
    queue and DLQ (80). ``queues`` maps each queue to the type that names it.

    Raises:
        ConfigError: naming the key to change, and the longest name that fits.
    """
    names = ResourceNames(LONGEST_PREFIX)
    longest = min(MAX_FUNCTION_NAME - len(names.runner("")), MAX_QUEUE_NAME - len(names.dlq("")))
    for queue, job_type in sorted(queues.items()):
        checks = (
            (names.runner(queue), MAX_FUNCTION_NAME, "its runner function's", "Lambda's"),
            (names.dlq(queue), MAX_QUEUE_NAME, "its DLQ's", "SQS's"),
        )
        for name, limit, what, whose in checks:
            if len(name) > limit:
                key = f"types.{job_type}.queue" if job_type != queue else f"types.{job_type}"
                raise ConfigError(
                    source,
                    key,
                    f"queue name {queue!r} is too long: {what} name would be {len(name)} characters under a"
                    f" 16-character prefix, over {whose} {limit}: give the queue a name of at most {longest}"
                    f' characters (set queue = "..." on the type)',
                )


def refuse_shared_logical_ids(source: str, names: Iterable[str], key: Callable[[str], str]) -> None:
    """Refuse two of ``names`` that the template would give one logical ID
    (``nightly-digest`` and ``nightlyDigest``): one would silently replace the
    other's resources on AWS. ``key`` names the declaration key to blame.

    Raises:
        ConfigError: two names share a logical ID.
    """
    seen: dict[str, str] = {}
    for name in sorted(names):
        other = seen.setdefault(logical_id(name), name)
        if other != name:
            raise ConfigError(
                source,
                key(name),
                f"{other!r} and {name!r} would share the template's resource names ({logical_id(name)}...): rename one",
            )
