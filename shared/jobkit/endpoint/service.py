"""The push endpoint's work, whatever serves it: a request of job specs in, an answer per job out.

A request is ``{"jobs": [...]}``, each job a wire-format body (docs/wire-format.md)
in which ``v``, ``id`` and ``enqueuedAt`` may be left out (the endpoint fills
in ``1``, a new UUID and its own clock). Every job is checked as the runner
would check it (the wire schema, the type among the endpoint's, its
``params_schema``, the root-job params, the times), then the valid ones are
pushed with the push SDK: batches of 10 and 1 MiB, bounded retries, and the
roots recorded in the jobs table. A field the wire format does not name (a
newer producer's) is kept in the body sent, and counts toward its size, as the
runner keeps it (:attr:`JobSpecification.extra_fields`). The answer names each
job's fate, in the request's order:

- ``enqueued``: sent (its ``id`` is in the answer);
- ``refused``: it is not a job the endpoint takes; sending it again will not help;
- ``failed``: SQS did not take it (throttled, say); sending it again may.

A request may open and seal batches with ``"batches": [...]``, whose jobs
join them with ``"batch": {"id": ...}`` (:mod:`jobkit.endpoint.batches`):
opened before the jobs are sent, sealed after. A request may also hold
``"cancel": [...]``, beside or instead of its jobs:
cancellations of jobs of the endpoint's types, each answered under
``"cancel"`` (:mod:`jobkit.endpoint.control`). The jobs are sent first, then
the cancellations recorded. ``GET ?type=T&id=ID&domain=D`` answers one job's
status.

HTTP status: 200 when every job was enqueued and every cancellation recorded
(``cancelled`` or ``ended``), 207 when some were not, 400 for a request that
is not ``{"jobs": [...]}`` or ``{"cancel": [...]}``, 413 for more than
:data:`MAX_JOBS` jobs and cancellations, 401 for a wrong producer signature,
503 when the endpoint's own key cannot be used. The endpoint never logs params.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock
from jobkit.core.correlation import correlation_scope, from_headers
from jobkit.core.errors import JobKitError, JobQueueError, SpecError, UnknownJobType
from jobkit.core.spec import JobSpecification
from jobkit.core.wire import check_priority, decode
from jobkit.endpoint.batches import EndpointBatches
from jobkit.endpoint.control import STATES, EndpointControl, cancelled_by, job_keys
from jobkit.endpoint.signature import HEADER, KeyUnusable, SignatureRefused, usable_key, verify
from jobkit.records import TableUnavailable

if TYPE_CHECKING:
    from jobkit.declaration.config import Declaration
    from jobkit.push import JobQueueGroup

log = logging.getLogger(__name__)

#: Jobs and cancellations in one request (a function URL takes at most 6 MB of request).
MAX_JOBS = 500
MAX_BODY_BYTES = 6 * 1024 * 1024
#: The error classes of a job the endpoint refuses: sending it again will not help.
REFUSED = frozenset({"SpecError", "InvalidParams", "UnknownJobType"})
NOT_JOBS = 'the request must be a JSON object {"jobs": [...]} with at least one job'
NOT_A_REQUEST = (
    'the request must be a JSON object with "jobs": [...], "cancel": [...] and/or "batches": [...],'
    " at least one of them not empty"
)


@dataclass
class Response:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})

    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False)


class PushEndpoint:
    """Takes job specs, and cancellations, over HTTP for the types of
    ``declaration`` (the endpoint's), and answers their status.

    Args:
        declaration: the types the endpoint takes, with their schemas.
        group: the push SDK it sends, cancels and reads status with (made on the first request).
        clock: the endpoint's clock.
        hmac_key: with ``auth = "hmac"``, the key producers sign with (made on
            the first request); ``None``: requests are authenticated before
            they reach the endpoint (IAM).
    """

    def __init__(
        self,
        declaration: Declaration,
        group: Callable[[], JobQueueGroup],
        clock: Clock,
        hmac_key: Callable[[], bytes] | None = None,
        signature_clock: Clock | None = None,
    ) -> None:
        self._declaration = declaration
        self._group = group
        self._clock = clock
        self._hmac_key = hmac_key
        # a producer signs with its own (real) clock: the local stack's may have been moved ahead
        self._signature_clock = signature_clock or clock
        self._control = EndpointControl(declaration, group)
        self._batches = EndpointBatches(declaration, group)

    def handle(
        self, method: str, headers: Mapping[str, str], body: bytes, query: str = "", principal: str | None = None
    ) -> Response:
        """Answer one request. ``headers`` have lowercase names; ``query`` is the
        raw query string (a GET's); ``principal`` the caller's IAM principal ARN,
        when the request was signed with SigV4 (it names who cancelled)."""
        verb = method.upper()
        if verb not in ("POST", "GET"):
            return _error(405, 'use POST with a JSON body {"jobs": [...], "cancel": [...]}, or GET ?type=T&id=ID')
        if verb == "POST" and len(body) > MAX_BODY_BYTES:
            return _error(413, f"the request is {len(body)} bytes, over the {MAX_BODY_BYTES} the endpoint takes")
        # a GET is signed over its raw query string, a POST over its body
        signed = query.encode("utf-8", "surrogateescape") if verb == "GET" else body
        refused = self._check_signature(headers, signed, "query string" if verb == "GET" else "body")
        if refused is not None:
            return refused
        if verb == "GET":
            if query.startswith("batch=") or "&batch=" in query:
                return Response(*self._batches.status(query))
            return Response(*self._control.status(query))
        try:
            request = decode(body)
        except SpecError as exc:
            return _error(400, f"the request is not JSON: {exc}")
        if not isinstance(request, dict) or ("cancel" not in request and "batches" not in request):
            jobs, cancel, batches = request.get("jobs") if isinstance(request, dict) else None, None, None
            if not isinstance(jobs, list) or not jobs:
                return _error(400, NOT_JOBS)
        else:
            jobs, cancel, batches = request.get("jobs", []), request.get("cancel"), request.get("batches")
            lists = [jobs, *(request[key] for key in ("cancel", "batches") if key in request)]  # null is no list
            if not all(isinstance(x, list) for x in lists) or not any(lists):
                return _error(400, NOT_A_REQUEST)
        if cancel is None and batches is None and len(jobs) > MAX_JOBS:
            return _error(413, f"{len(jobs)} jobs in one request, over the {MAX_JOBS} the endpoint takes")
        count = len(jobs) + len(cancel or []) + len(batches or [])
        if count > MAX_JOBS:
            return _error(
                413, f"{count} jobs, cancellations and batches in one request, over the {MAX_JOBS} the endpoint takes"
            )
        # the request's X-Request-ID, X-Correlation-ID or trace ID, else a new one
        environ_names = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()}
        answer: dict[str, Any] = {}
        done = True
        with correlation_scope(from_headers(environ_names)):
            opened = self._batches.open(batches) if batches is not None else []
            if "jobs" in request:
                # a job of a batch whose entry was refused would join a batch not the producer's
                not_opened = {
                    (e.domain, e.answer["id"])
                    for e in opened
                    if e.answer["status"] in ("refused", "failed") and "id" in e.answer
                }
                answers = self._push(jobs, not_opened)
                counts = {s: sum(1 for a in answers if a["status"] == s) for s in ("enqueued", "refused", "failed")}
                answer.update(counts, jobs=answers)
                done = counts["enqueued"] == len(answers)
            if batches is not None:
                # a batch that lost a job of this request stays open: the producer sends it again, then seals
                short = {
                    batch
                    for job, a in zip(jobs, answer.get("jobs", []), strict=False)
                    if a["status"] != "enqueued" and (batch := _batch_of(job)) is not None
                }
                answer["batches"] = self._batches.seal(opened, unsent=short)
                done = done and all(a["status"] in ("open", "sealed") for a in answer["batches"])
            if cancel is not None:
                cancelled = self._control.cancel(cancel, cancelled_by(principal))
                cancel_counts = {s: sum(1 for a in cancelled if a["status"] == s) for s in STATES}
                answer.update(cancelCounts=cancel_counts, cancel=cancelled)
                done = done and cancel_counts["cancelled"] + cancel_counts["ended"] == len(cancelled)
        return Response(200 if done else 207, answer)

    def _check_signature(self, headers: Mapping[str, str], signed: bytes, what: str) -> Response | None:
        """With ``auth = "hmac"``: 401 for a wrong producer signature, 503 when the key cannot be used."""
        if self._hmac_key is None:
            return None
        try:
            verify(usable_key(self._hmac_key()), signed, headers.get(HEADER), self._signature_clock.now(), what=what)
        except SignatureRefused as exc:
            return _error(401, str(exc))
        except KeyUnusable as exc:  # the stack's fault, not the producer's: send again once fixed
            log.error("push endpoint takes no request: %s", exc)
            return _error(503, f"the endpoint cannot check signatures: {exc}")
        return None

    def _push(self, jobs: list[Any], refused: Collection[tuple[str | None, str]] = ()) -> list[dict[str, Any]]:
        now = self._clock.now()
        answers: list[dict[str, Any]] = []
        specs: list[JobSpecification] = []
        where: dict[str, int] = {}
        for index, raw in enumerate(jobs):
            answer: dict[str, Any] = {"index": index}
            answers.append(answer)
            try:
                spec = self._spec(raw, now)
                if spec.id in where:
                    raise SpecError(f"id {spec.id!r} is also job {where[spec.id]} of this request")
                if (spec.domain, spec.batch) in refused:
                    raise SpecError(f"its batch {spec.batch!r} was not opened by this request (its entry was refused)")
            except SpecError as exc:
                answer.update(job_keys(raw), status="refused", errorClass=type(exc).__name__, error=str(exc))
                continue
            where[spec.id] = index
            answer.update(id=spec.id, type=spec.type, status="enqueued")
            specs.append(spec)
        by_batch: dict[tuple[str | None, str | None], list[JobSpecification]] = {}
        for spec in specs:  # a batch's members go alone: a batch that refuses them refuses only them
            by_batch.setdefault((spec.domain, spec.batch), []).append(spec)
        for pushed in by_batch.values():
            try:
                self._group().push(pushed)
            except JobQueueError as exc:
                for failed in exc.failed:
                    state = "refused" if failed.code in REFUSED else "failed"
                    answers[where[failed.job_id]].update(status=state, errorClass=failed.code, error=failed.message)
            except JobKitError as exc:  # the batch refused them (sealed, never opened), or its table is down
                state = "failed" if isinstance(exc, TableUnavailable) else "refused"
                for spec in pushed:
                    answers[where[spec.id]].update(status=state, errorClass=type(exc).__name__, error=str(exc))
        log.info(
            "push endpoint: %d of %d jobs enqueued",
            sum(1 for a in answers if a["status"] == "enqueued"),
            len(answers),
        )
        return answers

    def _spec(self, raw: Any, now: float) -> JobSpecification:
        """The job, if it is the wire format and a type the endpoint takes; push
        checks the rest as the runner would (root params, times, params schema,
        size), and its refusals come back as ``refused``."""
        if not isinstance(raw, dict):
            raise SpecError(f"a job is a JSON object, got {type(raw).__name__}")
        if "priorAttempts" in raw:
            raise SpecError("priorAttempts is the runner's to keep, not a producer's to send: leave it out")
        if "chain" in raw:
            raise SpecError("chain is jobkit's to set on a chain's steps, not a producer's to send: leave it out")
        check_priority(raw.get("priority"))  # a runner ignores a bad one: refused here, where it can be fixed
        filled = {"v": 2 if "batch" in raw else 1, "id": str(uuid.uuid4()), "enqueuedAt": now, **raw}
        spec = JobSpecification.from_dict(filled)
        if spec.type not in self._declaration.types:
            taken = ", ".join(sorted(self._declaration.types))
            raise UnknownJobType(spec.type, f"the push endpoint does not take it (it takes {taken})")
        if spec.batch is not None and not self._declaration.types[spec.type].batches:
            # refused alone: its batch's other jobs are pushed together, and would be refused with it
            raise SpecError(
                f"{spec.type}: its jobs cannot be batch members: declare batches = true in [types.{spec.type}]"
            )
        return spec


def _batch_of(job: Any) -> tuple[str | None, str] | None:
    """The (domain, batch ID) a raw job names, if it names them as a job may."""
    batch = job.get("batch") if isinstance(job, dict) else None
    batch_id = batch.get("id") if isinstance(batch, dict) else None
    domain = job.get("domain") if isinstance(job, dict) else None
    if not isinstance(batch_id, str) or not (domain is None or isinstance(domain, str)):
        return None
    return domain, batch_id


def _error(status: int, message: str) -> Response:
    return Response(status, {"error": message})
