"""Test your own jobs with the real runner, on an AWS emulated in-process (moto).

jobkit registers a pytest plugin with a ``jobkit_stack`` fixture::

    from jobkit import JobSpecification

    def test_an_invoice_is_sent(jobkit_stack):
        jobkit_stack.push(JobSpecification("sendInvoice", {"order": 42}))
        jobkit_stack.drain()  # runs every queued job; re-raises the error of a job that failed for good
        assert jobkit_stack.outcomes("sendInvoice") == {Outcome.SUCCEEDED: 1}

``drain()`` goes through the same runner, event source mapping emulation,
retries with backoff, de-duplication and delays as the deployed stack, on a
virtual clock that skips the waits.

Outside pytest (a script, another test runner, a notebook), use
:class:`JobkitStack` as a context manager::

    with JobkitStack.from_config("infra/jobs.toml") as stack:
        stack.push(JobSpecification("sendInvoice", {"order": 42}))
        stack.drain()

Needs the ``local`` extra (moto).
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobFailed
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, declaration_from_environment
from jobkit.declaration.lanes import lane_key
from jobkit.local.lambda_context import FakeLambdaContext
from jobkit.push import JobQueueGroup
from jobkit.records import FailureRecord
from jobkit.sqs import receive_messages

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

__all__ = ["FakeLambdaContext", "JobkitStack", "Outcome", "sqs_event"]

DEFAULT_START = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class JobkitStack:
    """The local stack for tests: push, drain, inspect.

    The virtual clock flows with real time, as on AWS: a job takes the time it
    takes, and one that starts after another was pushed really starts after it
    (``remove_duplicates`` counts on that). Waits (a retry's backoff, a delay,
    a visibility timeout) are skipped, not slept through.

    Args:
        declaration: the job types (default: ``declaration_from_environment()``,
            i.e. $JOBKIT_CONFIG or infra/jobs.toml).
        start: where the virtual clock starts (epoch seconds).
        seed: seeds retry jitter, so runs repeat.
        frozen: stop the clock instead: it moves only when a drain skips a wait
            or you call :meth:`advance` (exact pickup delays, but every run then
            starts at the instant it was pushed).
    """

    def __init__(
        self,
        declaration: Declaration | None = None,
        *,
        start: float = DEFAULT_START,
        seed: int = 0,
        frozen: bool = False,
    ) -> None:
        from jobkit.local.stack import LocalStack

        self.declaration = declaration or declaration_from_environment()
        self.clock = VirtualClock(start, flowing=not frozen)
        self.stack = LocalStack(self.declaration, clock=self.clock, seed=seed)

    @classmethod
    def from_config(cls, path: str | os.PathLike[str], **options: Any) -> JobkitStack:
        """A stack for the declaration at ``path`` (a jobs.toml); ``options`` as for the constructor.

        The declaration's ``code_dir`` goes on ``sys.path`` while the stack runs,
        so its classes import as they would in the runner function.
        """
        from jobkit.declaration.config import load_declaration

        return cls(load_declaration(path), **options)

    def __enter__(self) -> JobkitStack:
        self.stack.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.stop()

    # -- pushing ------------------------------------------------------------------------

    def group(self, domain: str | None = None) -> JobQueueGroup:
        """The push SDK, wired to the local queues."""
        return self.stack.queue_group(domain)

    def push(self, jobs: JobSpecification | Iterable[JobSpecification], *, domain: str | None = None) -> list[str]:
        """Push jobs now; returns their IDs."""
        return self.group(domain).push(jobs)

    # -- running ------------------------------------------------------------------------

    def drain(
        self,
        *,
        raise_errors: bool = True,
        until: float | None = None,
        max_polls: int = 100_000,
        timeout_s: float | None = 60.0,
    ) -> list[RecordResult]:
        """Run queued jobs (and the jobs they push) until the queues are empty.

        Retries wait out their backoff and delayed jobs their release time on
        the virtual clock, instantly.

        Args:
            raise_errors: re-raise the exception of a job that failed for good
                (dead-lettered); a job that failed and then succeeded on a retry
                raises nothing.
            until: stop when the virtual clock reaches this time (epoch seconds).
            max_polls: fail after this many polling rounds (a job that re-enqueues itself forever).
            timeout_s: fail after this many real seconds (``None``: no limit).

        Returns:
            What happened to each message delivered during this drain.

        Raises:
            RuntimeError: a bound was reached with jobs still queued.
        """
        before = len(self.stack.results.results)
        self.stack.drain(until=until, max_polls=max_polls, timeout_s=timeout_s)
        results = self.stack.results.results[before:]
        if raise_errors:
            self._raise_first_failure(results)
        return results

    def handler(self, job_type: str) -> Any:
        """The Lambda handler of the runner that serves a type (``handler(event, context)``)."""
        return self.stack.runners[self.declaration.job_type(job_type).queue].handle

    def advance(self, seconds: float) -> None:
        """Move the virtual clock forward."""
        self.clock.advance(seconds)

    # -- handles for fault tests ----------------------------------------------------------

    @property
    def sqs(self) -> Any:
        """The stack's own SQS client (hook ``client.meta.events`` to inject faults)."""
        return self.stack.sqs

    @property
    def dynamodb(self) -> Any:
        """The stack's own DynamoDB client."""
        return self.stack.dynamodb

    def _lane(self, job_type: str, priority: str | None) -> str:
        queue = self.declaration.queues[self.declaration.job_type(job_type).queue]
        if queue.lane(priority) is None:
            raise ValueError(f"queue {queue.name!r} of {job_type} has no priority lane {priority!r}")
        return lane_key(queue.name, priority)

    def queue_url(self, job_type: str, *, dlq: bool = False, priority: str | None = None) -> str:
        """The URL of a type's queue (or of one of its priority lanes), or of its DLQ."""
        return self.stack.queue_url(self._lane(job_type, priority), dlq=dlq)

    def queue_arn(self, job_type: str, *, dlq: bool = False, priority: str | None = None) -> str:
        """The ARN of a type's queue (or of one of its priority lanes), or of its DLQ."""
        return self.stack.queue_arn(self._lane(job_type, priority), dlq=dlq)

    def receive(self, job_type: str, max_messages: int = 10, *, priority: str | None = None) -> list[MessageTypeDef]:
        """Receive messages from a type's queue (or priority lane) as Lambda's
        poller does (each receive counts toward the queue's maxReceiveCount),
        without running them: hand them to :meth:`deliver`, twice for a
        duplicate delivery, or drop them for an invocation that died before it reported."""
        return receive_messages(self.sqs, self.queue_url(job_type, priority=priority), max_messages)

    def deliver(
        self, job_type: str, messages: list[dict[str, Any]], *, priority: str | None = None
    ) -> list[RecordResult]:
        """Hand already-received messages to the type's runner, as the event source
        mapping of its queue (or of the priority lane they were received from)
        does: it deletes those the runner does not report as failed. Calling it
        again with the same messages is SQS delivering them again."""
        before = len(self.stack.results.results)
        self.stack.mappings[self._lane(job_type, priority)].deliver(messages)
        return self.stack.results.results[before:]

    def _raise_first_failure(self, results: Sequence[RecordResult]) -> None:
        failed = [r for r in results if r.outcome in (Outcome.DEAD_LETTERED, Outcome.POISONED)]
        if not failed:
            return
        first = failed[0]
        error = first.exception or JobFailed(first.error or "the job failed")
        error.add_note(
            f"jobkit: {first.job_type} {first.job_id or first.message_id} was dead-lettered after attempt "
            f"{first.attempt}" + (f"; {len(failed) - 1} more job(s) failed too" if len(failed) > 1 else "")
        )
        raise error

    # -- looking --------------------------------------------------------------------------

    @property
    def results(self) -> list[RecordResult]:
        """Every record result so far, in order."""
        return self.stack.results.results

    def outcomes(self, job_type: str | None = None) -> Counter[Outcome]:
        """How many messages ended how, for one type or all."""
        return self.stack.results.outcomes(job_type)

    def dead_letters(self, job_type: str, *, priority: str | None = None) -> list[MessageTypeDef]:
        """The messages in the DLQ of a type's queue, or of one of its priority lanes
        (``priority="default"``: the queue's own); by default in every lane's (SQS ReceiveMessage shape)."""
        lanes = self._lanes(job_type, priority)
        return [message for lane in lanes for message in self.stack.dead_letters(lane)]

    def failures(self, job: JobSpecification | str) -> list[FailureRecord]:
        """A job's failure records, newest first. Give the spec you pushed, or the
        ID ``push()`` returned: then every type's and domain's records of that ID."""
        records = self.stack.records
        if isinstance(job, JobSpecification):
            runs = records.runs(job.type, job.id, 100, job.domain).get(job.domain)
            return list(runs.failures) if runs is not None else []
        found = [f for t in self.declaration.types for r in records.runs(t, job, 100).values() for f in r.failures]
        return sorted(found, key=lambda f: (f.at, f.attempt), reverse=True)

    def queued(self, job_type: str, *, priority: str | None = None) -> int:
        """Messages waiting in a type's queue, or in one of its priority lanes (``"default"``:
        the queue's own); by default in all its lanes (visible, in flight and delayed)."""
        return sum(self.stack.queue_depth(lane) for lane in self._lanes(job_type, priority))

    def _lanes(self, job_type: str, priority: str | None) -> list[str]:
        if priority is not None:
            return [self._lane(job_type, priority)]
        return [lane.key for lane in self.declaration.queues[self.declaration.job_type(job_type).queue].lanes]


#: Who sent a message, as SQS names it in every event record (an IAM unique ID).
_SENDER_ID = "AIDAJOBKITTESTSENDER"


def sqs_event(
    jobs: Iterable[JobSpecification],
    *,
    queue_arn: str = "arn:aws:sqs:us-east-1:123456789012:jobkit-queue",
    receive_count: int = 1,
    now: float | None = None,
) -> dict[str, Any]:
    """A Lambda SQS event carrying jobs, as the event source mapping would deliver
    them, for calling a handler directly. No SQS is involved: the runner only
    needs SQS when a job fails or is re-enqueued.

    Args:
        now: when the jobs were sent (default: the real time). A runner refuses
            jobs stamped more than 5 minutes ahead of its own clock, so pass the
            stack's ``clock.now()`` when its runner is on a virtual clock behind
            the real one.
    """
    from jobkit.core.correlation import current_correlation_id, new_correlation_id
    from jobkit.local.esm import lambda_record

    if now is None:
        now = time.time()
    correlation_id = current_correlation_id() or new_correlation_id()  # as push() sends them: one per call
    region = queue_arn.split(":")[3]
    timestamp = str(int(now * 1000))
    records = []
    for spec in jobs:
        stamped = spec.stamped(now)
        body = stamped.to_message()
        message = {  # as ReceiveMessage returns it
            "MessageId": str(uuid.uuid4()),
            "ReceiptHandle": f"local-{uuid.uuid4().hex}",
            "Body": body,
            "MD5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
            "Attributes": {
                "ApproximateReceiveCount": str(receive_count),
                "SentTimestamp": timestamp,
                "SenderId": _SENDER_ID,
                "ApproximateFirstReceiveTimestamp": timestamp,
            },
            "MessageAttributes": {
                "JobType": {"DataType": "String", "StringValue": stamped.type},
                "CorrelationId": {"DataType": "String", "StringValue": correlation_id},
            },
        }
        records.append(lambda_record(message, queue_arn, region))
    return {"Records": records}
