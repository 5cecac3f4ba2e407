"""The push SDK: JobQueueGroup (MediaWiki's JobQueueGroup, on SQS).

``push()`` sends specs now, in SendMessageBatch requests packed by 10 entries
and by 1 MiB, one queue per job type as the declaration routes them.
``lazy_push()`` buffers until ``flush()``, which a ``deferred()`` block, the
WSGI middleware or the Lambda decorator call for you.

A push either enqueues every job or raises :class:`~jobkit.core.errors.JobQueueError`
listing exactly the jobs that were not enqueued; the others are enqueued.

The group sends through a :class:`PushTransport`; :class:`jobkit.sqs.SqsPushTransport`
is SQS's. Apps get their groups from :func:`jobkit.queue_group`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from jobkit.batches.chains import ChainMethods
from jobkit.batches.control import BatchKeeper, BatchMethods
from jobkit.batches.members import enrol
from jobkit.core.clock import Clock, SystemClock
from jobkit.core.errors import FailedJob, JobKitError, JobQueueError, SpecError
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, JobType, declaration_from_environment
from jobkit.declaration.lanes import DEFAULT_LANE
from jobkit.flow.fairness import message_group_id
from jobkit.jobs import lazy_push
from jobkit.jobs.children import ChildIds, derived_job_id
from jobkit.jobs.lazy_push import ASGIApp
from jobkit.payloads.offload import fitted
from jobkit.payloads.options import threshold_bytes
from jobkit.sqs import (
    MAX_JOB_BYTES,
    TYPE_ATTRIBUTE,
    Outgoing,
    SendResult,
    SqsPushTransport,
    delay_seconds,
    send_with_retries,
    string_attribute,
)
from jobkit.sqs.origin import Origin
from jobkit.status.control import JobControl, JobControlMethods

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from jobkit.payloads.store import PayloadStore
    from jobkit.records.store import Records

__all__ = ["JobQueueGroup", "PushTransport", "RootJobRecorder", "derived_job_id"]

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class PushTransport(Protocol):
    """Where a group sends its jobs (see :class:`jobkit.sqs.SqsPushTransport`)."""

    def queue_url(self, job_type: str, priority: str | None = None) -> str:
        """The URL of the queue (or its lane, :mod:`jobkit.declaration.lanes`) that serves a declared job type."""
        ...

    def send_batch(self, batch: Sequence[Outgoing[T]]) -> SendResult[T]:
        """One batch request of messages to one queue: which were sent, and
        which were not (and whether another try may do better)."""
        ...


class RootJobRecorder(Protocol):
    def record_root(self, spec: JobSpecification) -> None: ...


@dataclass
class _Shared:
    """What sibling groups (one per domain) share: transport, routing, store, clock."""

    declaration: Declaration
    transport: PushTransport
    root_recorder: RootJobRecorder | None
    records: Records | None
    clock: Clock
    sleep: Callable[[float], None]
    max_send_attempts: int
    payloads: PayloadStore | None = None  # where params too large for a message go (jobkit.payloads)
    groups: dict[str | None, JobQueueGroup] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class JobQueueGroup(JobControlMethods, BatchMethods, ChainMethods):
    """Pushes jobs for one domain (MediaWiki's JobQueueGroup for one wiki).

    Apps get one with ``jobkit.queue_group(domain)``, which :mod:`jobkit.wiring`
    builds from the environment, like every group the runner, the local stack
    and the CLI use. Build one by hand only to inject a client or a transport.

    Args:
        domain: the tenant the jobs belong to; specs without a domain get this one.
        declaration: the job types; defaults to ``declaration_from_environment()``
            ($JOBKIT_CONFIG or infra/jobs.toml, and $JOBKIT_PREFIX).
        transport: where jobs go; default: SQS, through ``sqs_client``.
        sqs_client: a boto3 SQS client.
        sqs_client_factory: makes the SQS client on first use, if ``sqs_client`` is
            not given. One of ``transport``, ``sqs_client`` and ``sqs_client_factory``
            is required.
        queue_urls: SQS queue name -> URL, to skip GetQueueUrl (the deployed stack sets these).
        dedup_store: records root-job timestamps after a root job is sent.
        records: the jobs table, for ``cancel``, ``cancel_all``, ``status`` and ``wait``.
        clock: the time source for enqueue timestamps and delays.
        max_send_attempts: tries per entry before it is reported as not enqueued.
        sleep: how to wait between tries (tests pass a no-op).
        payloads: the payload bucket: params of a job too large for a message go there.
    """

    def __init__(
        self,
        domain: str | None = None,
        *,
        declaration: Declaration | None = None,
        transport: PushTransport | None = None,
        sqs_client: SQSClient | None = None,
        sqs_client_factory: Callable[[], SQSClient] | None = None,
        queue_urls: Mapping[str, str] | None = None,
        dedup_store: RootJobRecorder | None = None,
        records: Records | None = None,
        clock: Clock | None = None,
        max_send_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        payloads: PayloadStore | None = None,
        _shared: _Shared | None = None,
        _child_ids: ChildIds | None = None,
    ) -> None:
        self.domain = domain
        self._child_ids = _child_ids
        if _shared is None:
            if transport is None and sqs_client is None and sqs_client_factory is None:
                raise TypeError(
                    "JobQueueGroup needs sqs_client, sqs_client_factory or transport;"
                    " jobkit.queue_group() builds one from the environment"
                )
            declaration = declaration or declaration_from_environment()
            if transport is None:
                transport = SqsPushTransport(
                    declaration, sqs_client=sqs_client, sqs_client_factory=sqs_client_factory, queue_urls=queue_urls
                )
            _shared = _Shared(
                declaration=declaration,
                transport=transport,
                root_recorder=dedup_store,
                records=records,
                clock=clock or SystemClock(),
                sleep=sleep,
                max_send_attempts=max(1, max_send_attempts),
                payloads=payloads,
            )
        self._shared = _shared
        if _child_ids is None:
            self._shared.groups.setdefault(domain, self)
        self._lazy = lazy_push.LazyBuffer(self.push)

    @property
    def declaration(self) -> Declaration:
        return self._shared.declaration

    @property
    def pushing_job(self) -> JobSpecification | None:  # the job whose attempt pushes through it (None: an app)
        return self._child_ids.parent if self._child_ids is not None else None

    @property
    def pushing_lane(self) -> str | None:  # that job's priority lane (where its batches' callbacks and chains go)
        return self.pushing_job.priority if self.pushing_job is not None else None

    @property
    def records(self) -> Records | None:
        """The jobs table's records (None for a group made without one)."""
        return self._shared.records

    # -- domains -------------------------------------------------------------

    def for_domain(self, domain: str | None) -> JobQueueGroup:
        """The group for another domain, sharing this one's transport, store and caches."""
        return self._sibling(domain)

    def _sibling(self, domain: str | None) -> JobQueueGroup:
        if self._child_ids is not None:  # a parent job pushing to another domain: IDs still derive from it
            return JobQueueGroup(domain, _shared=self._shared, _child_ids=self._child_ids)
        with self._shared.lock:
            group = self._shared.groups.get(domain)
            if group is None:
                group = JobQueueGroup(domain, _shared=self._shared)
            return group

    def for_job(self, parent: JobSpecification) -> JobQueueGroup:
        """A group for the parent's domain whose pushes give each spec without an
        explicit ID one derived from the parent's ID and the push order. The
        runner hands one to every attempt: a retried parent pushes the same IDs
        again, so the de-duplication of ``deliver_once`` and
        ``remove_duplicates`` types catches the repeats."""
        return JobQueueGroup(parent.domain, _shared=self._shared, _child_ids=ChildIds(parent))

    # -- pushing -------------------------------------------------------------

    def push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[str]:
        """Enqueue jobs now.

        Returns:
            The IDs of the enqueued jobs, in order.

        Raises:
            JobQueueError: some jobs were not enqueued; it lists exactly which,
                and why. All the others were enqueued.
        """
        specs = self._adopt(jobs)
        if not specs:
            return []
        now, shared = self._shared.clock.now(), self._shared
        # A batch's members are counted in before they are sent (jobkit.batches.members).
        members = [self._with_domain(s) for s in specs if s.batch is not None]  # (most pushes: none)
        enrolled = enrol(shared.declaration, shared.records, members, now, pusher=self.pushing_job)
        messages, failed = self._prepare(specs, now, Origin.current())  # Origin: one correlation ID per push()
        result = send_with_retries(
            self._shared.transport.send_batch,
            messages,
            max_attempts=self._shared.max_send_attempts,
            sleep=self._shared.sleep,
        )
        failed.extend(FailedJob(f.outgoing.item.id, f.outgoing.item.type, f.code, f.error) for f in result.failed)
        self._record_roots([message.item for message in result.sent])
        enqueued_ids = [message.item.id for message in result.sent]
        if failed:
            sent = {(message.item.type, message.item.id) for message in result.sent}
            enrolled.withdraw([(f.job_type, f.job_id) for f in failed if (f.job_type, f.job_id) not in sent])
            raise JobQueueError(failed, enqueued_ids)
        return enqueued_ids

    def lazy_push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> None:
        """Buffer jobs until :meth:`flush` (MediaWiki's lazyPush)."""
        self._lazy.add(self._adopt(jobs))

    def flush(self) -> list[str]:
        """Push everything buffered by :meth:`lazy_push` (inside a request or a ``deferred()``
        block: that request's or block's jobs). A failure is logged with the job IDs and re-raised."""
        return self._lazy.flush()

    @property
    def pending(self) -> int:
        """How many lazily pushed jobs wait for :meth:`flush`."""
        return self._lazy.pending

    @contextmanager
    def deferred(self) -> Iterator[JobQueueGroup]:
        """Flush lazily pushed jobs when the (outermost) block ends, even if it raised:
        the jobs describe work the app already decided on, and losing them is worse
        than running them (``with group.deferred(): group.lazy_push(spec)``)."""
        with self._lazy.deferred():
            yield self

    def flush_after(self, handler: F) -> F:
        """Decorate a Lambda handler so lazily pushed jobs are flushed when it returns."""
        return lazy_push.flush_after(self.deferred, handler)

    def wsgi_middleware(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """Wrap a WSGI app so lazily pushed jobs are flushed after the response is sent::

        app.wsgi_app = group.wsgi_middleware(app.wsgi_app)           # Flask: app stays a Flask
        application = group.wsgi_middleware(get_wsgi_application())  # Django, in wsgi.py
        """
        return lazy_push.wsgi_middleware(app, self._lazy)

    def asgi_middleware(self, app: ASGIApp) -> ASGIApp:
        """Wrap an ASGI app (Starlette, FastAPI) so lazily pushed jobs are flushed after each response::

        app = FastAPI()
        app.add_middleware(...)                    # your own
        app.add_middleware(group.asgi_middleware)  # added last: the outermost of yours
        """
        return lazy_push.asgi_middleware(app, self._lazy)

    def deduplicate_root_job(self, spec: JobSpecification) -> bool:
        """Record a root job's timestamp so older leaves are superseded, without
        pushing it (MediaWiki's deduplicateRootJob, for "virtual" roots).

        Returns:
            True if it was recorded; False if the jobs table could not be written
            (logged as a warning: older leaves then run, which costs work, never
            correctness).

        Raises:
            SpecError: the spec has no root-job params, or its timestamp is more
                than the allowed clock skew ahead.
        """
        if not spec.has_root_job_params():
            raise SpecError(f"{spec.type} {spec.id}: has no rootJobSignature/rootJobTimestamp params")
        if self._shared.root_recorder is None:
            raise JobKitError("this JobQueueGroup has no dedup store to record root jobs in")
        try:
            self._shared.root_recorder.record_root(self._with_domain(spec))
        except SpecError:
            raise
        except JobKitError as exc:
            log.warning("could not record root job %s %s: %s", spec.type, spec.id, exc)
            return False
        return True

    def _job_control(self) -> JobControl:
        shared = self._shared
        if shared.records is None:
            raise JobKitError("this JobQueueGroup has no jobs table: use jobkit.queue_group(), or pass records")
        return JobControl(shared.declaration, shared.records, shared.clock, shared.sleep)

    def _batch_keeper(self) -> BatchKeeper:
        shared = self._shared
        if shared.records is None:
            raise JobKitError("this JobQueueGroup has no jobs table: use jobkit.queue_group(), or pass records")
        # a callback is no member: pushed through a group no job's pushes pass through (they join its batch)
        group = self if self._child_ids is None else JobQueueGroup(self.domain, _shared=shared)
        return BatchKeeper(shared.records, shared.clock, group.push, declaration=shared.declaration)

    # -- internals -------------------------------------------------------------

    def _adopt(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[JobSpecification]:
        specs = [jobs] if isinstance(jobs, JobSpecification) else list(jobs)
        for spec in specs:
            if not isinstance(spec, JobSpecification):
                raise TypeError(f"push() takes JobSpecification objects, got {type(spec).__name__}")
        return self._child_ids.adopt(specs, self.domain) if self._child_ids is not None else specs

    def _with_domain(self, spec: JobSpecification) -> JobSpecification:
        return spec if spec.domain is not None or self.domain is None else spec.replace(domain=self.domain)

    def _prepare(
        self, specs: Sequence[JobSpecification], now: float, origin: Origin
    ) -> tuple[list[Outgoing[JobSpecification]], list[FailedJob]]:
        from botocore.exceptions import BotoCoreError, ClientError

        messages: list[Outgoing[JobSpecification]] = []
        failed: list[FailedJob] = []
        for original in specs:
            try:
                messages.append(self._message(self._with_domain(original).stamped(now), now, origin))
            except JobKitError as exc:
                failed.append(FailedJob(original.id, original.type, type(exc).__name__, str(exc)))
            except ClientError as exc:  # the queue URL could not be resolved
                error = exc.response.get("Error", {})
                failed.append(FailedJob(original.id, original.type, error.get("Code", "ClientError"), str(exc)))
            except BotoCoreError as exc:
                failed.append(FailedJob(original.id, original.type, type(exc).__name__, str(exc)))
        return messages, failed

    def _message(self, spec: JobSpecification, now: float, origin: Origin) -> Outgoing[JobSpecification]:
        job_type = self._declared_type(spec.type)
        job_type.check_job(spec, now)  # refuse here what a runner would dead-letter as poison
        spec = self._shared.declaration.in_pushers_lane(self.pushing_job, spec)
        transport, lane = self._shared.transport, None if spec.priority == DEFAULT_LANE else spec.priority
        # (a transport from before lanes takes the type alone)
        queue_url = transport.queue_url(spec.type) if lane is None else transport.queue_url(spec.type, lane)
        release_in = (spec.release_at - now) if spec.release_at is not None else 0
        # Longer delays hop: the runner re-enqueues until the release time.
        attributes = {TYPE_ATTRIBUTE: string_attribute(spec.type)}
        # The tenant of an SQS fair queue: the type's fairness key (the domain by default).
        group_id = message_group_id(job_type.fairness, spec)
        # over the type's threshold (with where it came from): its params to the bucket (no bucket: refused if too big)
        threshold = threshold_bytes(job_type.offload_above_kb, MAX_JOB_BYTES + origin.size) - origin.size
        body, size = fitted(spec, attributes, self._shared.payloads, threshold)
        # Where it came from, while it fits: a job within bytes of the limit goes without.
        if size + origin.size <= MAX_JOB_BYTES:
            attributes, size = {**attributes, **origin.attributes}, size + origin.size
        else:
            log.debug("%s %s: sent without its correlation ID and trace context: no room", spec.type, spec.id)
        return Outgoing(spec, queue_url, body, attributes, delay_seconds(release_in), group_id, origin.system, size)

    def _declared_type(self, name: str) -> JobType:
        """The declared type of a job to send. A job's group knows only what its runner knows: a type
        it does not know is one the pushing type's ``pushes`` lacks, and the error says so."""
        if self._child_ids is None:
            return self._shared.declaration.job_type(name)
        return self._shared.declaration.pushed_type(self._child_ids.parent.type, name)

    def _record_roots(self, sent: list[JobSpecification]) -> None:
        recorder = self._shared.root_recorder
        if recorder is None:
            return
        for spec in sent:
            if spec.is_root_job():
                try:
                    recorder.record_root(spec)
                except JobKitError as exc:
                    # enqueued: failing now would push it again; the runner records it when it meets the root
                    log.warning("could not record root job %s: %s", spec.id, exc)
