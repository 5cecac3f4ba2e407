"""The push SDK: JobQueueGroup (MediaWiki's JobQueueGroup, on SQS).

``push()`` sends specs now, in SendMessageBatch requests packed by 10 entries
and by 1 MiB, one queue per job type as the declaration routes them.
``lazy_push()`` buffers until ``flush()``, which a ``deferred()`` block, the
WSGI middleware or the Lambda decorator call for you.

A push either enqueues every job or raises :class:`~jobkit.errors.JobQueueError`
listing exactly the jobs that were not enqueued; the others are enqueued.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from jobkit.clock import Clock, SystemClock
from jobkit.config import Declaration, declaration_from_environment
from jobkit.errors import FailedJob, JobKitError, JobQueueError, SpecError
from jobkit.spec import JobSpecification, canonical_json
from jobkit.sqs import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ENTRIES,
    MAX_DELAY_S,
    MAX_JOB_BYTES,
    RUNNER_RESERVED_BYTES,
    TYPE_ATTRIBUTE,
    QueueDirectory,
    is_retryable,
    message_size,
    string_attribute,
)

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: The namespace of job IDs derived from a parent job's (see :meth:`JobQueueGroup.for_job`).
_CHILD_ID_NAMESPACE = uuid.UUID("6b7c3f0e-5d1a-4c8e-9a0b-2f4e6d8c1a3b")


def derived_job_id(parent: JobSpecification, child: JobSpecification, occurrence: int = 0) -> str:
    """The ID of a job that ``parent`` pushes without an ID of its own.

    It is the same on every attempt of the same parent message (its type,
    domain, ID and enqueue time) for the same child (its type, domain and
    params), and differs for another child, another parent, or the same parent
    ID pushed again later. ``occurrence`` counts identical children pushed in
    one attempt.
    """
    what = canonical_json({"type": child.type, "domain": child.domain or parent.domain, "params": child.params})
    name = "\x00".join([parent.type, parent.domain or "", parent.id, repr(parent.enqueued_at), what, str(occurrence)])
    return str(uuid.uuid5(_CHILD_ID_NAMESPACE, name))


class RootJobRecorder(Protocol):
    def record_root(self, spec: JobSpecification) -> None: ...


class _ChildIds:
    """Derives the IDs of the jobs one attempt of a parent pushes."""

    def __init__(self, parent: JobSpecification) -> None:
        self._parent = parent
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def adopt(self, specs: list[JobSpecification]) -> list[JobSpecification]:
        with self._lock:
            return [self._derived(spec) if spec.id_generated else spec for spec in specs]

    def _derived(self, spec: JobSpecification) -> JobSpecification:
        try:
            first = derived_job_id(self._parent, spec)
        except (TypeError, ValueError, RecursionError):
            return spec  # params push() will refuse, naming the job: keep its own ID
        occurrence = self._seen[first]
        self._seen[first] += 1
        return spec.replace(id=first if occurrence == 0 else derived_job_id(self._parent, spec, occurrence))


@dataclass
class _Entry:
    """One spec, ready to send."""

    spec: JobSpecification
    queue_url: str
    body: str
    attributes: dict[str, dict[str, str]]
    size: int
    delay_s: int


@dataclass
class _Transport:
    """What sibling groups (one per domain) share: client, routing, caches."""

    declaration: Declaration
    client_factory: Callable[[], Any]
    queue_urls: Mapping[str, str]
    root_recorder: RootJobRecorder | None
    clock: Clock
    sleep: Callable[[float], None]
    max_send_attempts: int
    groups: dict[str | None, JobQueueGroup] = field(default_factory=dict)
    _client: Any = None
    _directory: QueueDirectory | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self.client_factory()
            return self._client

    @property
    def directory(self) -> QueueDirectory:
        client = self.client
        with self._lock:
            if self._directory is None:
                self._directory = QueueDirectory(client, self.declaration, self.queue_urls)
            return self._directory


class _ForDomain:
    """``JobQueueGroup.for_domain(d)`` on the class uses the process-wide default
    group (configured from the environment); ``group.for_domain(d)`` on an
    instance returns a sibling that shares the instance's client and caches."""

    def __get__(self, group: JobQueueGroup | None, owner: type[JobQueueGroup]) -> Callable[[str | None], JobQueueGroup]:
        if group is None:
            return owner._default_for_domain
        return group._sibling


class JobQueueGroup:
    """Pushes jobs for one domain (MediaWiki's JobQueueGroup for one wiki).

    Apps get one with ``JobQueueGroup.for_domain(domain)``, which is built by
    :mod:`jobkit.wiring` from the environment, like every group the runner,
    the local stack and the CLI use. Build one by hand only to inject clients.

    Args:
        domain: the tenant the jobs belong to; specs without a domain get this one.
        declaration: the job types; defaults to ``declaration_from_environment()``
            ($JOBKIT_CONFIG or infra/jobs.toml, and $JOBKIT_PREFIX).
        sqs_client: a boto3 SQS client.
        sqs_client_factory: makes the SQS client on first use, if ``sqs_client`` is
            not given (default: :class:`jobkit.wiring.AwsClients`, boto3's own chain).
        queue_urls: SQS queue name -> URL, to skip GetQueueUrl (the deployed stack sets these).
        dedup_store: records root-job timestamps after a root job is sent.
        clock: the time source for enqueue timestamps and delays.
        max_send_attempts: tries per entry before it is reported as not enqueued.
        sleep: how to wait between tries (tests pass a no-op).
    """

    for_domain = _ForDomain()

    _defaults: dict[str | None, JobQueueGroup] = {}
    _defaults_lock = threading.Lock()

    def __init__(
        self,
        domain: str | None = None,
        *,
        declaration: Declaration | None = None,
        sqs_client: Any = None,
        sqs_client_factory: Callable[[], Any] | None = None,
        queue_urls: Mapping[str, str] | None = None,
        dedup_store: RootJobRecorder | None = None,
        clock: Clock | None = None,
        max_send_attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        _transport: _Transport | None = None,
        _child_ids: _ChildIds | None = None,
    ) -> None:
        self.domain = domain
        self._child_ids = _child_ids
        self._transport = _transport or _Transport(
            declaration=declaration or declaration_from_environment(),
            client_factory=(lambda: sqs_client)
            if sqs_client is not None
            else (sqs_client_factory or _default_sqs_client),
            queue_urls=queue_urls or {},
            root_recorder=dedup_store,
            clock=clock or SystemClock(),
            sleep=sleep,
            max_send_attempts=max(1, max_send_attempts),
        )
        if _child_ids is None:
            self._transport.groups.setdefault(domain, self)
        self._buffer: list[JobSpecification] = []
        self._buffer_lock = threading.Lock()
        self._deferred_depth = threading.local()

    @property
    def declaration(self) -> Declaration:
        return self._transport.declaration

    # -- domains -------------------------------------------------------------

    def _sibling(self, domain: str | None) -> JobQueueGroup:
        if self._child_ids is not None:  # a parent job pushing to another domain: IDs still derive from it
            return JobQueueGroup(domain, _transport=self._transport, _child_ids=self._child_ids)
        with self._transport._lock:
            group = self._transport.groups.get(domain)
            if group is None:
                group = JobQueueGroup(domain, _transport=self._transport)
            return group

    def for_job(self, parent: JobSpecification) -> JobQueueGroup:
        """A group for the parent's domain whose pushes give each spec without an
        explicit ID one derived from the parent's ID and the push order. The
        runner hands one to every attempt: a retried parent pushes the same IDs
        again, so the de-duplication of ``deliver_once`` and
        ``remove_duplicates`` types catches the repeats."""
        return JobQueueGroup(parent.domain, _transport=self._transport, _child_ids=_ChildIds(parent))

    @classmethod
    def _default_for_domain(cls, domain: str | None) -> JobQueueGroup:
        with cls._defaults_lock:
            if None not in cls._defaults:
                from jobkit.wiring import Wiring

                cls._defaults[None] = Wiring.from_environment().group()
            root = cls._defaults[None]
        return root._sibling(domain)

    @classmethod
    def reset_defaults(cls) -> None:
        """Forget the process-wide default groups (tests, or after changing the environment)."""
        with cls._defaults_lock:
            cls._defaults.clear()

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
        now = self._transport.clock.now()
        entries, failed = self._prepare(specs, now)
        sent, send_failed = self._send(entries)
        failed.extend(send_failed)
        self._record_roots(sent)
        enqueued_ids = [e.spec.id for e in sent]
        if failed:
            raise JobQueueError(failed, enqueued_ids)
        return enqueued_ids

    def lazy_push(self, jobs: JobSpecification | Iterable[JobSpecification]) -> None:
        """Buffer jobs until :meth:`flush` (MediaWiki's lazyPush)."""
        specs = self._adopt(jobs)
        with self._buffer_lock:
            self._buffer.extend(specs)

    def flush(self) -> list[str]:
        """Push everything buffered by :meth:`lazy_push`.

        A failure is logged with the job IDs and re-raised; it is never swallowed.
        """
        with self._buffer_lock:
            specs, self._buffer = self._buffer, []
        try:
            return self.push(specs)
        except JobQueueError as exc:
            log.error(
                "lazy push: %d job(s) not enqueued: %s",
                len(exc.failed),
                ", ".join(exc.failed_ids),
                extra={"failed_job_ids": list(exc.failed_ids)},
            )
            raise

    @property
    def pending(self) -> int:
        """How many lazily pushed jobs wait for :meth:`flush`."""
        with self._buffer_lock:
            return len(self._buffer)

    @contextmanager
    def deferred(self) -> Iterator[JobQueueGroup]:
        """Flush lazily pushed jobs when the (outermost) block ends, even if it raised:
        the jobs describe work the app already decided on, and losing them is worse
        than running them.

        ::

            with group.deferred():
                group.lazy_push(spec)
        """
        depth = getattr(self._deferred_depth, "value", 0)
        self._deferred_depth.value = depth + 1
        try:
            yield self
        finally:
            self._deferred_depth.value = depth
            if depth == 0:
                self.flush()

    def flush_after(self, handler: F) -> F:
        """Decorate a Lambda handler so lazily pushed jobs are flushed when it returns."""

        @functools.wraps(handler)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.deferred():
                return handler(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def wsgi_middleware(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """Wrap a WSGI app so lazily pushed jobs are flushed after the response is sent."""

        def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            return _FlushOnClose(app(environ, start_response), self.flush)

        return middleware

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
        if self._transport.root_recorder is None:
            raise JobKitError("this JobQueueGroup has no dedup store to record root jobs in")
        try:
            self._transport.root_recorder.record_root(self._with_domain(spec))
        except SpecError:
            raise
        except JobKitError as exc:
            log.warning("could not record root job %s %s: %s", spec.type, spec.id, exc)
            return False
        return True

    # -- internals -------------------------------------------------------------

    def _adopt(self, jobs: JobSpecification | Iterable[JobSpecification]) -> list[JobSpecification]:
        specs = [jobs] if isinstance(jobs, JobSpecification) else list(jobs)
        for spec in specs:
            if not isinstance(spec, JobSpecification):
                raise TypeError(f"push() takes JobSpecification objects, got {type(spec).__name__}")
        return self._child_ids.adopt(specs) if self._child_ids is not None else specs

    def _with_domain(self, spec: JobSpecification) -> JobSpecification:
        return spec if spec.domain is not None or self.domain is None else spec.replace(domain=self.domain)

    def _prepare(self, specs: Sequence[JobSpecification], now: float) -> tuple[list[_Entry], list[FailedJob]]:
        from botocore.exceptions import BotoCoreError, ClientError

        entries: list[_Entry] = []
        failed: list[FailedJob] = []
        for original in specs:
            try:
                entries.append(self._entry(self._with_domain(original).stamped(now), now))
            except JobKitError as exc:
                failed.append(FailedJob(original.id, original.type, type(exc).__name__, str(exc)))
            except ClientError as exc:  # the queue URL could not be resolved
                error = exc.response.get("Error", {})
                failed.append(FailedJob(original.id, original.type, error.get("Code", "ClientError"), str(exc)))
            except BotoCoreError as exc:
                failed.append(FailedJob(original.id, original.type, type(exc).__name__, str(exc)))
        return entries, failed

    def _entry(self, spec: JobSpecification, now: float) -> _Entry:
        # Refuse here what a runner would dead-letter as poison.
        spec.check_root_job_params()
        spec.check_times(now)
        queue_url = self._transport.directory.queue_url(spec.type)
        body = spec.to_message()
        attributes = {TYPE_ATTRIBUTE: string_attribute(spec.type)}
        size = message_size(body, attributes)
        if size > MAX_JOB_BYTES:
            raise SpecError(
                f"{spec.type} {spec.id}: message is {size} bytes, over the {MAX_JOB_BYTES} a job may have (the SQS"
                f" limit less {RUNNER_RESERVED_BYTES} bytes the runner needs to re-enqueue it);"
                " pass a reference (an S3 key, a page ID) instead of the data"
            )
        release_in = (spec.release_at - now) if spec.release_at is not None else 0
        # Longer delays hop: the runner re-enqueues until the release time.
        delay_s = max(0, min(MAX_DELAY_S, int(-(-release_in // 1))))
        return _Entry(spec, queue_url, body, attributes, size, delay_s)

    def _send(self, entries: list[_Entry]) -> tuple[list[_Entry], list[FailedJob]]:
        sent: list[_Entry] = []
        failed: list[FailedJob] = []
        pending = entries
        for attempt in range(1, self._transport.max_send_attempts + 1):
            retry: list[tuple[_Entry, str, str]] = []
            for batch in pack_batches(pending):
                ok, again, permanent = self._send_batch(batch)
                sent.extend(ok)
                retry.extend(again)
                failed.extend(permanent)
            if not retry:
                break
            if attempt == self._transport.max_send_attempts:
                failed.extend(FailedJob(e.spec.id, e.spec.type, code, msg) for e, code, msg in retry)
                break
            pending = [e for e, _, _ in retry]
            self._transport.sleep(min(2.0, 0.05 * 2**attempt))
        return sent, failed

    def _send_batch(self, batch: list[_Entry]) -> tuple[list[_Entry], list[tuple[_Entry, str, str]], list[FailedJob]]:
        from botocore.exceptions import BotoCoreError, ClientError

        request = [
            {"Id": str(i), "MessageBody": e.body, "MessageAttributes": e.attributes, "DelaySeconds": e.delay_s}
            for i, e in enumerate(batch)
        ]
        try:
            response = self._transport.client.send_message_batch(QueueUrl=batch[0].queue_url, Entries=request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "ClientError"), error.get("Message", str(exc))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if is_retryable(code, status):
                return [], [(e, code, message) for e in batch], []
            return [], [], [FailedJob(e.spec.id, e.spec.type, code, message) for e in batch]
        except BotoCoreError as exc:  # connection errors, timeouts
            return [], [(e, type(exc).__name__, str(exc)) for e in batch], []
        ok = [batch[int(s["Id"])] for s in response.get("Successful", [])]
        again: list[tuple[_Entry, str, str]] = []
        permanent: list[FailedJob] = []
        for failure in response.get("Failed", []):
            entry = batch[int(failure["Id"])]
            code, message = failure.get("Code", "Failed"), failure.get("Message", "")
            if failure.get("SenderFault"):
                permanent.append(FailedJob(entry.spec.id, entry.spec.type, code, message))
            else:
                again.append((entry, code, message))
        return ok, again, permanent

    def _record_roots(self, sent: list[_Entry]) -> None:
        recorder = self._transport.root_recorder
        if recorder is None:
            return
        for entry in sent:
            if entry.spec.is_root_job():
                try:
                    recorder.record_root(entry.spec)
                except JobKitError as exc:
                    # The job is enqueued; failing the push now would make the app push
                    # it again. The runner records the timestamp when it meets the root.
                    log.warning("could not record root job %s: %s", entry.spec.id, exc)


def pack_batches(
    entries: Sequence[_Entry], *, max_entries: int = MAX_BATCH_ENTRIES, max_bytes: int = MAX_BATCH_BYTES
) -> list[list[_Entry]]:
    """Group entries into SendMessageBatch requests: one queue per request, at
    most ``max_entries`` entries and ``max_bytes`` bytes each, in push order."""
    open_batches: dict[str, tuple[list[_Entry], int]] = {}
    batches: list[list[_Entry]] = []
    for entry in entries:
        batch, size = open_batches.get(entry.queue_url, ([], 0))
        if batch and (len(batch) == max_entries or size + entry.size > max_bytes):
            batches.append(batch)
            batch, size = [], 0
        batch.append(entry)
        open_batches[entry.queue_url] = (batch, size + entry.size)
    batches.extend(batch for batch, _ in open_batches.values() if batch)
    return batches


class _FlushOnClose:
    """A WSGI response iterable that flushes lazy jobs once the server closes it."""

    def __init__(self, response: Iterable[bytes], flush: Callable[[], object]) -> None:
        self._response = response
        self._flush = flush

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._response)

    def close(self) -> None:
        try:
            close = getattr(self._response, "close", None)
            if close is not None:
                close()
        finally:
            self._flush()


def _default_sqs_client() -> Any:
    from jobkit.wiring import AwsClients

    return AwsClients().sqs
