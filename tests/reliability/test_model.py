"""A model-based property test: random interleavings of pushes, failures,
crashes, duplicate deliveries, lease expiries and AWS faults, against the real
runner on moto, and what must hold once everything has drained.

Each example is a short program of rules: push plain jobs, remove-duplicates
twins, deliver-once jobs, root jobs that fan out and stale leaves; run a
polling round; deliver the same received batch twice; re-send a copy of a
message; receive a batch and drop it (an invocation that died before it
reported); let time pass (past a claim's lease, past a visibility timeout);
make DynamoDB fail for a while; make one SQS operation fail; make some entries
of the next SendMessageBatch fail. And what careless or hostile producers do:
remove-duplicates roots sent by a producer that does not record them; root
timestamps from the future, null ones, release times in milliseconds, 400-digit
numbers, a body with its type twice, a body whose type belongs to another
queue; one job ID reused in two domains and two types, or pushed twice
(a retried request); parents that push deliver-once children and then fail;
and an operator's redrive of a DLQ, by copy or as SQS's own move task does
it (a new message that keeps the attributes), after deferrals and holds too.
Flow control in combination: debounced jobs pushed in bursts in two domains,
leaves of roots that a newer root supersedes before or while they wait, a
debounced type that also removes duplicates and delivers once, leaves
whose wait SQS refuses to take before their root is superseded, producers
whose clocks run slow, debounced jobs with a release time, an old push of a
job ID retried after a newer job of its key, and
containers that die holding a concurrency lease, so holds interleave with
retries (and a job is held, runs and fails, and is held again). Cancellations
race all of it: an app cancels a pushed job of a cancellable type (queued,
delayed, waiting in a debounce window, held, retried, dead-lettered, or
already run) or every job of a type and domain pushed before a time, and an
operator's redrive may lift the cancellations of what it sends back. Priority
lanes interleave with all of it: an app switches the lane it pushes to, so
plain jobs, deliver-once jobs, roots and leaves, parents and their children,
limited and debounced jobs and batches' members go to a type's high lane or
its queue's own, and the polls, duplicate deliveries, crashes and redrives
work on each lane's queue and DLQ. Each job's script says how its attempts go:
succeed, fail N times then succeed, fail for good, or kill the invocation
(``testjobs.SimulatedCrash``, a BaseException, after the claims were taken).

Then the faults stop, the clock runs past every delay and visibility timeout
until the queues are empty, and the ledger must show, for every job SQS
accepted from a push:

- it ended in a terminal category: succeeded, duplicate (of a successful run,
  or a deliver-once redelivery after a success), superseded, debounced,
  cancelled, or dead-lettered;
  a producer's bad body is dead-lettered as poison and never runs;
- a dead letter says why: jobkit's reason attributes, or, when SQS's redrive
  policy moved it, the job's failure records, or a delivery the model lost;
- a job is in a DLQ *and* done only if the model lost a delivery of it (a
  crashed batch, a failed delete: SQS's at-least-once);
- each de-duplication is justified: a duplicate has a twin that started after
  it was enqueued and succeeded; a superseded leaf has a newer root that was
  recorded (pushed through jobkit, or a virtual root) or ran; a redelivery
  follows a success of the same job; a debounced job's work was done by a run
  of its type, domain and key that started after it was pushed, or is in the
  DLQ with a job of its key pushed no earlier (a superseded owner covers
  nothing);
- a debounced job pushed once (or twice within the wait) runs at most once;
- a job dead-lettered as ``held_too_long`` was held back, in holds with
  nothing between them, for at least its type's ``max_held_s``;
- a deliver-once child of a parent that failed after pushing it succeeded at
  most once; a redriven job's first run after the redrive is its attempt 1;
- the outcome matches the script when nothing disturbed the job: a job that
  can succeed within its attempts is not dead-lettered, a job that cannot is;
- no attempt started before the job's release time;
- a job stays in the lanes it was pushed to: every message of it that a
  runner sends (hops, holds, waits, hand-backs, DLQ copies) and every run of
  it are in a lane one of its pushes went to, and a parent's children were
  pushed to the parent's lane (their queue has it);
- a cancelled job has a cancellation that covers it (of its ID, recorded
  after that push, not lifted; or its type and domain's ``cancel_all`` since
  its push), and no attempt of a push that a cancellation covers starts after
  the cancellation was recorded (unless the runner could not read the table
  and ran it, fail-open, and said so); a job that a cancelled job debounced
  ended with it (the run that stood for it was cancelled).

One local stack serves every example (creating one costs half a second): each
example pushes to a fresh domain, which is part of every dedup key, and leaves
the queues empty. Jobs are told apart by type, domain and ID, as jobkit does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test
from ledger import Category, Fate, SentJobs, by_job, fates, key_of, reason

from jobkit import JobQueueGroup, JobSpecification
from jobkit.batches.chains import is_next_step, step_batch_id
from jobkit.batches.control import Batch, callback_spec
from jobkit.batches.options import with_batch_callbacks
from jobkit.core.clock import VirtualClock
from jobkit.core.errors import JobKitError, JobQueueError
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.core.spec import new_root_job_params
from jobkit.declaration.config import load_declaration
from jobkit.declaration.lanes import lane_key
from jobkit.local import LocalStack
from jobkit.local.moto_patches import has_receivable
from jobkit.local.stack import ACCOUNT_ID, CREDENTIALS
from jobkit.ops.cancel import lifter
from jobkit.ops.dead_letters import DeadLetter
from jobkit.ops.redrive import REDRIVE_VISIBILITY_S, redrive
from jobkit.ops.scope import Scope, resolve_scopes
from jobkit.payloads.store import PayloadStore
from jobkit.push import derived_job_id
from jobkit.records import JobRuns
from jobkit.records.batches import ENDS, PENDING, BatchRef
from jobkit.records.keys import JobRef
from jobkit.records.leases import Leases
from jobkit.sqs import TYPE_ATTRIBUTE, string_attribute
from jobkit.wiring import AwsClients

import testjobs
from conftest import FIXTURES, START
from faults import (
    DYNAMODB_CAPACITY,
    DYNAMODB_SERVER_ERROR,
    DYNAMODB_THROTTLE,
    SQS_SERVER_ERROR,
    SQS_THROTTLE,
    FailBatchEntries,
    FailCalls,
)
from testjobs import CALLBACKS, SCRIPTED, SimulatedCrash

#: The end a batch counts for a member, by the member's category in the ledger.
_END_OF = {
    Category.SUCCEEDED: {"succeeded"},
    Category.DUPLICATE: {"succeeded", "skipped"},  # a deliver_once redelivery after a success, or a duplicate
    Category.SUPERSEDED: {"skipped"},
    Category.DEBOUNCED: {"skipped"},
    Category.CANCELLED: {"cancelled"},
    Category.DEAD_LETTERED: {"dead_lettered"},
}
#: The error codes of the SQS faults the model injects.
INJECTED_SQS_ERRORS = {SQS_THROTTLE[0], SQS_SERVER_ERROR[0]}
EXAMPLES = int(__import__("os").environ.get("MODEL_EXAMPLES", "200"))
EXAMPLE_SPACING_S = 100_000  # far apart: an example's messages, claims and roots never meet the next's
#: reliability.toml (as the soak runs it), with cancellation on the types of every
#: other option: roots and leaves, deliver_once, limits, debounce, plain delays.
_CANCELLABLE = ("plain", "once", "leaf", "limited", "debounced")
#: and batches' members of the same, a parent's children (once) and its roots' leaves (leaf) with them;
#: "reached" is the batches' callback, beside "plain".
_BATCHED = ("plain", "once", "leaf", "limited", "debounced", "parent")
_DECLARED = load_declaration(FIXTURES / "reliability.toml")
#: and a high priority lane on the queues of the same (shared: once and leaf), a parent's children's included.
_LANED = ("plain", "once", "leaf", "limited", "debounced", "parent")
LANE = "high"
#: Every type puts the params of a message over 1 KiB in the payload bucket: the app's large pushes
#: (padded params) and larger messages of its own (a batch member's, a root's) go through it.
_TYPES = {
    n: dataclasses.replace(
        t,
        cancellable=n in _CANCELLABLE,
        batches=n in _BATCHED,
        priorities=((LANE, 2),) if n in _LANED else (),
        offload_above_kb=1,
    )
    for n, t in _DECLARED.types.items()
}
#: What the app adds to the params of each job it pushes while it pushes large ones: 1,200 bytes.
PAD = "p" * 1200
_TYPES["reached"] = dataclasses.replace(
    _TYPES["plain"],
    name="reached",
    class_path="testjobs:ScriptedCallbackJob",
    cancellable=False,
    batches=False,
    batch_callback=True,
)
#: a chain's later steps: pushed by the runner that ends the step before, so a batch_callback type too
_TYPES["step"] = dataclasses.replace(_TYPES["plain"], name="step", batches=True, batch_callback=True)
DECLARATION = dataclasses.replace(_DECLARED, types=with_batch_callbacks(_TYPES))
#: Every queue, and every priority lane of one (``leaf-high``): each a queue and a DLQ of its own.
QUEUES = sorted(DECLARATION.lanes)
#: The lane of each queue and DLQ of the stack, by SQS name.
_LANE_OF = {
    name: lane
    for key, lane in DECLARATION.lanes.items()
    for name in (DECLARATION.queue_name(key), DECLARATION.dlq_name(key))
}
#: The remove_duplicates types, and the params each leaves out of its dedup hash.
IGNORED = {name: t.remove_duplicates_ignore_params for name, t in DECLARATION.types.items() if t.remove_duplicates}


def _scope(key: str) -> Scope:
    """The DLQ of one queue or lane (by its key), as `jobkit dlq redrive QUEUE [--priority LANE]` takes it."""
    lane = DECLARATION.lanes[key]
    return next(s for s in resolve_scopes(DECLARATION, lane.queue) if s.priority == lane.priority)


def _body(job_type: str, job_id: str, domain: str, now: float, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"v": 1, "id": job_id, "type": job_type, "domain": domain, "params": {}, "enqueuedAt": now}
    params = changes.pop("params", {})
    data["params"] = params
    return {**data, **changes}


SIG = "c" * 40
#: kind -> (id, domain, now) -> (the type the body names, the queue it is sent to, the body)
BAD_BODIES: dict[str, Callable[[str, str, float], tuple[str, str, str]]] = {
    "root timestamp an hour ahead": lambda i, d, now: (
        "leaf",
        "shared",
        json.dumps(_body("leaf", i, d, now, params={"rootJobSignature": SIG, "rootJobTimestamp": now + 3600})),
    ),
    "null root timestamp": lambda i, d, now: (
        "leaf",
        "shared",
        json.dumps(_body("leaf", i, d, now, params={"rootJobSignature": SIG, "rootJobTimestamp": None})),
    ),
    "release time in milliseconds": lambda i, d, now: (
        "plain",
        "plain",
        json.dumps(_body("plain", i, d, now, releaseAt=now * 1000)),
    ),
    "400-digit enqueue time": lambda i, d, now: (
        "plain",
        "plain",
        json.dumps(_body("plain", i, d, now)).replace(f'"enqueuedAt": {json.dumps(now)}', '"enqueuedAt": ' + "9" * 400),
    ),
    "type given twice": lambda i, d, now: (
        "plain",
        "plain",
        json.dumps(_body("plain", i, d, now)).replace('"type": "plain"', '"type": "plain", "type": "twin"'),
    ),
    "a type of another queue": lambda i, d, now: ("twin", "plain", json.dumps(_body("twin", i, d, now))),
    # the parent runner knows "once" (its jobs push it) but must not run one
    "a type this queue's jobs push": lambda i, d, now: ("once", "parent", json.dumps(_body("once", i, d, now))),
}

SCRIPTS = st.sampled_from(
    [
        {},
        {},
        {"fail": 1},
        {"fail": 2},
        {"fail": 5},
        {"permanent": True},
        {"crash": [1]},
        {"fail": 1, "crash": [2]},
        {"crash": [1, 2, 3]},
    ]
)
DELAYS = st.sampled_from([None, None, None, 3, 1000])
DEBOUNCED = sorted(name for name, t in DECLARATION.types.items() if t.debounce is not None)
CANCELLABLE = sorted(name for name, t in DECLARATION.types.items() if t.cancellable)
#: The example's own domain, or a second one: debounce windows must not cross them.
OTHER_DOMAIN = st.booleans()


def _second_step_job(entry: dict[str, Any]) -> bool:
    body = json.loads(entry["MessageBody"])
    return body["type"] == "step" and body["params"].get("n") == 1


class Harness:
    """The stack, the ledger's hooks and the faults, shared by every example."""

    def __init__(self) -> None:
        self.clock = VirtualClock(START)
        self.stack = LocalStack(DECLARATION, clock=self.clock, seed=7).start()
        testjobs.use_clock(self.clock)
        sqs, dynamodb, s3 = self.stack.sqs, self.stack.dynamodb, self.stack.client("s3")
        # (the ledger reads large jobs' params with a client of its own: the faults are on the stack's)
        own = AwsClients(region=self.stack.region, endpoint_url=self.stack.endpoint_url, credentials=CREDENTIALS)
        bucket = self.stack.payload_bucket
        assert bucket is not None
        self.sent = SentJobs(sqs, key=by_job, now=self.clock.now, payloads=PayloadStore(own.client("s3"), bucket))
        # every result, with the (virtual) time the runner reported it: the hold clock's evidence
        self.timed: list[tuple[float, RecordResult]] = []
        record = self.stack.results.record
        self.stack.results.record = lambda result: (self.timed.append((self.clock.now(), result)), record(result))  # type: ignore[method-assign]
        self.last_batch: list[str] = []
        self.received: set[str] = set()
        sqs.meta.events.register("after-call.sqs.ReceiveMessage", self._received)
        # per job: the lanes SQS took its pushes to (SendMessageBatch), and those of every other send of it
        self.pushed_lanes: dict[str, set[str | None]] = {}
        self.sent_lanes: dict[str, set[str | None]] = {}
        sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", self._remember_batch)
        sqs.meta.events.register("after-call.sqs.SendMessageBatch", self._pushed)
        sqs.meta.events.register("provide-client-params.sqs.SendMessage", self._remember_one)
        sqs.meta.events.register("after-call.sqs.SendMessage", self._sent)
        self.faults: dict[str, FailCalls | FailBatchEntries] = {
            "dynamodb throttled": FailCalls(dynamodb, "dynamodb.*", codes=[DYNAMODB_THROTTLE, DYNAMODB_CAPACITY]),
            "dynamodb 5xx": FailCalls(dynamodb, "dynamodb.*", codes=[DYNAMODB_SERVER_ERROR]),
            "SendMessageBatch": FailCalls(sqs, "sqs.SendMessageBatch", codes=[SQS_THROTTLE, SQS_SERVER_ERROR]),
            "SendMessageBatch entries": FailBatchEntries(sqs, lambda entry: int(entry["Id"]) % 2 == 0),
            # the second job of a chain's step, when a runner pushes the step: the first is sent
            "a chain step's second job": FailBatchEntries(sqs, _second_step_job, only_matching=True),
            "SendMessage to a DLQ": FailCalls(
                sqs, "sqs.SendMessage", codes=[SQS_SERVER_ERROR], match=lambda p: p["QueueUrl"].endswith("-dlq")
            ),
            "SendMessage to re-enqueue": FailCalls(
                sqs, "sqs.SendMessage", codes=[SQS_THROTTLE], match=lambda p: not p["QueueUrl"].endswith("-dlq")
            ),
            "ChangeMessageVisibility": FailCalls(sqs, "sqs.ChangeMessageVisibility", codes=[SQS_SERVER_ERROR]),
            "DeleteMessage": FailCalls(sqs, "sqs.DeleteMessage", codes=[SQS_SERVER_ERROR]),
            "ReceiveMessage": FailCalls(sqs, "sqs.ReceiveMessage", codes=[SQS_THROTTLE]),
            "DeleteMessageBatch": FailCalls(sqs, "sqs.DeleteMessageBatch", codes=[SQS_SERVER_ERROR]),
            # the payload bucket: an upload (the push fails, nothing is sent) or an ended job's mark (the object
            # is kept), a fetch (retried), the removal of an ended job's object (kept)
            "PutObject": FailCalls(s3, "s3.PutObject", codes=[("SlowDown", 503)]),
            "GetObject": FailCalls(s3, "s3.GetObject", codes=[("InternalError", 500), ("SlowDown", 503)]),
            "DeleteObject": FailCalls(s3, "s3.DeleteObject", codes=[("InternalError", 500)]),
        }
        self.disarm()
        self.examples = 0
        self.steps = 0
        self.jobs = 0
        self.cancels = 0  # cancellations recorded (one job, or a type's jobs before a time)
        self.cancelled = 0  # jobs the runner acknowledged as cancelled
        self.redriven = 0  # dead letters an operator's redrive (by copy) sent back
        self.batches = 0  # batches checked
        self.lane_runs = 0  # runs in a priority lane
        self.lane_resends = 0  # jobs a runner or an operator sent again to a priority lane

    def _received(self, parsed: dict[str, Any], **_: Any) -> None:
        ids = [key_of(m["Body"], by_job) or m["MessageId"] for m in parsed.get("Messages", [])]
        if ids:
            self.last_batch = ids
            self.received.update(ids)

    @staticmethod
    def _remember_batch(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["lanes.batch"] = (params["QueueUrl"], {e["Id"]: e["MessageBody"] for e in params.get("Entries", [])})

    def _pushed(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        url, bodies = context.get("lanes.batch", ("", {}))
        for success in parsed.get("Successful", []):
            self._lane(self.pushed_lanes, bodies.get(success["Id"], ""), url)

    @staticmethod
    def _remember_one(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["lanes.one"] = (params["QueueUrl"], params["MessageBody"])

    def _sent(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        url, body = context.get("lanes.one", ("", ""))
        self._lane(self.sent_lanes, body, url)

    @staticmethod
    def _lane(lanes: dict[str, set[str | None]], body: str, url: str) -> None:
        key, lane = key_of(body, by_job), _LANE_OF.get(url.rsplit("/", 1)[-1])
        if key is not None and lane is not None:
            lanes.setdefault(key, set()).add(lane.priority)

    def fired(self) -> int:
        return sum(self.injected().values())

    def injected(self) -> dict[str, int]:
        """Faults injected so far, by kind (calls, or batch entries for partial failures)."""
        return {name: self._count(fault) for name, fault in self.faults.items()}

    @staticmethod
    def _count(fault: FailCalls | FailBatchEntries) -> int:
        return fault.failed_calls if isinstance(fault, FailCalls) else fault.failed_entries

    def large(self) -> int:
        """Large jobs pushed: a params object each, or the mark its runner left when the job ended."""
        listed = self.stack.client("s3").get_paginator("list_objects_v2").paginate(Bucket=self.stack.payload_bucket)
        return len({o["Key"].rsplit(".", 1)[0] for page in listed for o in page.get("Contents", [])})

    def disarm(self) -> None:
        for fault in self.faults.values():
            fault.remaining = 0

    def queue_url(self, queue: str, *, dlq: bool = False) -> str:
        name = DECLARATION.dlq_name(queue) if dlq else DECLARATION.queue_name(queue)
        return self.stack.queue_urls[name]

    def empty(self) -> bool:
        """Nothing visible, hidden or delayed in any queue (asked of moto directly:
        GetQueueAttributes computes every attribute, a scan each)."""
        now = self.clock.now()
        names = [DECLARATION.queue_name(q) for q in QUEUES]
        return self.stack.next_wakeup() is None and not any(
            has_receivable(ACCOUNT_ID, self.stack.region, name, now) for name in names
        )

    def reset(self) -> None:
        """Empty the DLQs (and the queues, if an example stopped half way) and the logs."""
        self.disarm()
        self.clock.advance(61)  # moto allows one purge of a queue a minute
        for queue in QUEUES:
            self.stack.sqs.purge_queue(QueueUrl=self.queue_url(queue, dlq=True))
            self.stack.sqs.purge_queue(QueueUrl=self.queue_url(queue))
        # Every example starts alike, so Hypothesis can replay and shrink a failure:
        # at a round time, with the same retry jitter.
        self.clock.advance_to((self.clock.now() // EXAMPLE_SPACING_S + 1) * EXAMPLE_SPACING_S)
        for runner in self.stack.runners.values():
            runner._rng.seed(7)
        self.stack.results.clear()
        self.timed.clear()
        SCRIPTED.clear()
        CALLBACKS.clear()
        self.sent.clear()
        self.received.clear()
        self.pushed_lanes.clear()
        self.sent_lanes.clear()

    def stop(self) -> None:
        self.stack.stop()


class JobModel(RuleBasedStateMachine):
    harness: ClassVar[Harness]

    def __init__(self) -> None:
        super().__init__()
        h = self.harness
        h.reset()
        h.examples += 1
        self.domain = f"example{h.examples}"
        self.group = h.stack.queue_group(self.domain)
        self.lost: set[str] = set()  # jobs with a delivery lost to a crash, a drop or a fault
        self.crashed: set[str] = set()  # jobs whose own script killed an invocation
        self.unreported: set[str] = set()  # jobs of a batch that died: what the runner did, it never said
        self.copied: set[str] = set()
        self.foreign: set[str] = set()  # sent by a producer that records no roots
        self.bad: set[str] = set()  # bodies a runner must refuse as poison
        self.children: set[str] = set()  # pushed by a parent that may have failed after pushing
        self.parents: dict[str, set[str]] = {}  # a parent's key -> its children's
        self.redriven: dict[str, float] = {}  # job -> when an operator redrove it
        self.twice: dict[str, float] = {}  # job ID pushed twice (a retried request) -> seconds between
        self.virtual_roots: list[tuple[str, str | None, str, float]] = []  # (type, domain, signature, timestamp)
        # What came last is the order of recording, not the clock (moto's stands still):
        # each cancellation and lift takes the next number of ``self.recorded``.
        self.recorded = 0
        # job -> (when its cancellation was recorded, how many runs it had then, its number)
        self.cancels: dict[str, tuple[float, int, int]] = {}
        # job -> (when an operator's redrive lifted its cancellation, its number)
        self.lifted: dict[str, tuple[float, int]] = {}
        # (type, domain, pushed before, when recorded, its number, runs then of each job it covers)
        self.watermarks: list[tuple[str, str | None, float, float, int, dict[str, int]]] = []
        self.serial = 0
        # batch ID -> whether the app's seal of it returned (a seal that raised is called again at the end)
        self.batches: dict[str, bool] = {}
        self.handles: dict[str, Batch] = {}
        # chain ID -> its steps, and whether the app's start of it returned (started again at the end if not)
        self.chains: dict[str, list[list[JobSpecification]]] = {}
        self.chains_started: dict[str, bool] = {}
        self.table_faults_before = self._table_faults()
        self.lane: str | None = None  # the lane the app pushes to now (None: each queue's own)
        self.large = False  # the app pushes large jobs now: their params go to the payload bucket
        self.pushed_in: dict[str, str | None] = {}  # a parent's key -> the lane it was pushed to

    def _table_faults(self) -> int:
        injected = self.h.injected()
        return injected["dynamodb throttled"] + injected["dynamodb 5xx"]

    @property
    def h(self) -> Harness:
        return self.harness

    @property
    def clock(self) -> VirtualClock:
        return self.h.clock

    # -- pushing ----------------------------------------------------------------------------

    def _push(self, specs: list[JobSpecification]) -> None:
        self.h.jobs += len(specs)
        with contextlib.suppress(JobQueueError):  # the ledger counts what SQS accepted
            self.group.push([self._in_lane(self._sized(spec)) for spec in specs])

    def _sized(self, spec: JobSpecification) -> JobSpecification:
        """The spec with a pad in its params while the app pushes large jobs (its params go to the bucket)."""
        return spec.replace(params={**spec.params, "pad": PAD}) if self.large else spec

    def _in_lane(self, spec: JobSpecification) -> JobSpecification:
        """The spec in the lane the app pushes to now, if its queue has it."""
        queue = DECLARATION.queues[DECLARATION.types[spec.type].queue]
        return spec if self.lane is None or queue.lane(self.lane) is None else spec.replace(priority=self.lane)

    @initialize(lane=st.sampled_from([None, LANE]), large=st.booleans())
    def start_in_a_lane(self, lane: str | None, large: bool) -> None:
        # half the examples push to the high lane from their first push, and half push large jobs
        self.lane, self.large = lane, large

    @rule(large=st.booleans())
    def switch_sizes(self, large: bool) -> None:
        # the app's next pushes are large (params in the payload bucket), or small
        self.large = large

    @rule(lane=st.sampled_from([None, LANE]))
    def switch_lanes(self, lane: str | None) -> None:
        # the app's next pushes go to this lane, where their queue has it
        self.lane = lane

    @rule(script=SCRIPTS, delay=DELAYS, count=st.integers(1, 3))
    def push_plain(self, script: dict[str, Any], delay: int | None, count: int) -> None:
        self._push([JobSpecification("plain", {"script": script, "n": n}, delay=delay) for n in range(count)])

    @rule(key=st.sampled_from(["a", "b"]), scripts=st.lists(SCRIPTS, min_size=1, max_size=3), gap=st.booleans())
    def push_twins(self, key: str, scripts: list[dict[str, Any]], gap: bool) -> None:
        for n, script in enumerate(scripts):
            self._push([JobSpecification("twin", {"key": key, "script": script, "n": n})])
            if gap:
                self.clock.advance(1)

    @rule(key=st.sampled_from(["a", "b"]), scripts=st.lists(SCRIPTS, min_size=1, max_size=4))
    def push_limited(self, key: str, scripts: list[dict[str, Any]]) -> None:
        self._push([JobSpecification("limited", {"key": key, "script": s, "n": n}) for n, s in enumerate(scripts)])

    def _group(self, other_domain: bool) -> JobQueueGroup:
        return self.h.stack.queue_group(f"{self.domain}b") if other_domain else self.group

    @rule(
        job_type=st.sampled_from(DEBOUNCED),
        key=st.sampled_from(["a", "b"]),
        scripts=st.lists(SCRIPTS, min_size=1, max_size=3),
        gap=st.integers(0, 4),
        other_domain=st.lists(OTHER_DOMAIN, min_size=3, max_size=3),
    )
    def push_debounced(
        self, job_type: str, key: str, scripts: list[dict[str, Any]], gap: int, other_domain: list[bool]
    ) -> None:
        # a burst, each job in this example's domain or a second one
        for n, script in enumerate(scripts):
            group = self._group(other_domain[n])
            self.h.jobs += 1
            with contextlib.suppress(JobQueueError):
                group.push([self._in_lane(JobSpecification(job_type, {"key": key, "script": script, "n": n}))])
            self.clock.advance(gap)

    @rule(
        job_type=st.sampled_from(DEBOUNCED),
        key=st.sampled_from(["a", "b"]),
        signature=st.sampled_from(["t1", "t2"]),
        ages=st.lists(st.sampled_from([0, 2, 20]), min_size=1, max_size=3),
        root_first=st.booleans(),
        recorded=st.sampled_from(["no", "before", "while they wait"]),
        script=SCRIPTS,
        other_domain=OTHER_DOMAIN,
        wait_lost=st.booleans(),
    )
    def push_debounced_leaves(
        self,
        job_type: str,
        key: str,
        signature: str,
        ages: list[int],
        root_first: bool,
        recorded: str,
        script: dict[str, Any],
        other_domain: bool,
        wait_lost: bool,
    ) -> None:
        # Leaves of one template's edits, a second apart, for one page: some of
        # roots older than one recorded before them, or recorded while they wait
        # in their window (or the first one a root job, which records itself)
        group = self._group(other_domain)
        now = self.clock.now()
        if recorded == "before":
            self._record_root(group, job_type, signature, now - 5)
        for n, age in enumerate(ages):
            params = new_root_job_params(signature, now - age)
            if not (root_first and n == 0):
                del params["rootJobIsSelf"]
            self.h.jobs += 1
            with contextlib.suppress(JobQueueError):
                group.push(
                    [self._in_lane(JobSpecification(job_type, {"key": key, "script": script, "n": n, **params}))]
                )
            self.clock.advance(1)
        if recorded == "while they wait":
            if wait_lost:  # SQS refuses the send of a wait: the leaf comes back as it was first delivered
                self.h.faults["SendMessage to re-enqueue"].remaining = 1
            self.poll()
            self._record_root(group, job_type, signature, self.clock.now())

    def _record_root(self, group: JobQueueGroup, job_type: str, signature: str, timestamp: float) -> None:
        params = new_root_job_params(signature, timestamp)
        try:
            group.deduplicate_root_job(JobSpecification(job_type, params))
        except JobKitError:
            return  # the store was down: nothing was recorded
        self.virtual_roots.append((job_type, group.domain, params["rootJobSignature"], timestamp))

    @rule(
        job_type=st.sampled_from(DEBOUNCED),
        key=st.sampled_from(["a", "b"]),
        script=SCRIPTS,
        slow_s=st.sampled_from([0, 30, 200]),
        release_s=st.sampled_from([None, None, 20]),
        other_domain=OTHER_DOMAIN,
    )
    def push_debounced_late(
        self, job_type: str, key: str, script: dict[str, Any], slow_s: int, release_s: int | None, other_domain: bool
    ) -> None:
        # A producer whose clock runs slow (within the 300 s allowed), or a job to run a little later
        now = self.clock.now()
        release = None if release_s is None else now + release_s
        params = {"key": key, "script": script, "n": self._new_id("late")}
        self.h.jobs += 1
        with contextlib.suppress(JobQueueError):
            self._group(other_domain).push(
                [JobSpecification(job_type, params, enqueued_at=now - slow_s, release_at=release)]
            )

    @rule(job_type=st.sampled_from(DEBOUNCED), script=SCRIPTS)
    def retry_an_old_push_after_a_newer_job(self, job_type: str, script: dict[str, Any]) -> None:
        # A job runs; later a newer job of its key is pushed, and then the old job's
        # request is retried (its ID again): the retry must not leave the newer one unrun
        old = JobSpecification(job_type, {"key": "b", "script": script}, id=self._new_id("old"))
        self._push([old])
        for _ in range(6):
            if any(run.job_id == old.id for run in SCRIPTED):
                break
            self.clock.advance(2)
            self.poll()
        self.clock.advance(20)
        self._push([JobSpecification(job_type, {"key": "b", "script": {}, "n": self._new_id("newer")})])
        self.clock.advance(1)
        self._push([old])
        self.twice[by_job(job_type, self.domain, old.id)] = 21

    @rule(key=st.sampled_from(["r1", "r2"]), leaves=st.integers(0, 3), script=SCRIPTS, leaf_script=SCRIPTS)
    def push_root(self, key: str, leaves: int, script: dict[str, Any], leaf_script: dict[str, Any]) -> None:
        self.clock.advance(1)  # a newer root than any before it
        params = {"script": {**script, "leaves": leaves}, "leafScript": leaf_script}
        self._push([JobSpecification("leaf", {**params, **new_root_job_params(key, self.clock.now())})])

    @rule(key=st.sampled_from(["r1", "r2"]), count=st.integers(1, 3), age=st.sampled_from([0, 5, 30]))
    def push_leaves(self, key: str, count: int, age: int) -> None:
        root = {k: v for k, v in new_root_job_params(key, self.clock.now() - age).items() if k != "rootJobIsSelf"}
        self._push([JobSpecification("leaf", {"n": n, **root}) for n in range(count)])

    @rule(job_type=st.sampled_from(["leaf", *DEBOUNCED]), key=st.sampled_from(["r1", "r2", "t1", "t2"]))
    def record_virtual_root(self, job_type: str, key: str) -> None:
        # a newer root, recorded while older leaves wait (in a debounce window, or in the queue)
        self.clock.advance(1)
        self._record_root(self.group, job_type, key, self.clock.now())

    # -- what careless and hostile producers send ----------------------------------------

    def _send_foreign(self, queue: str, bodies: list[str]) -> None:
        """A producer in another language: bodies of its own making, one
        SendMessageBatch, no root recording."""
        self.h.jobs += len(bodies)
        entries = [
            {"Id": str(n), "MessageBody": text, "MessageAttributes": {TYPE_ATTRIBUTE: string_attribute(queue)}}
            for n, text in enumerate(bodies)
        ]
        with contextlib.suppress(ClientError):  # an injected fault: the ledger counts what SQS accepted
            self.h.stack.sqs.send_message_batch(QueueUrl=self.h.queue_url(queue), Entries=entries)

    def _new_id(self, what: str) -> str:
        self.serial += 1
        return f"{what}{self.serial}"

    @rule(key=st.sampled_from(["r1", "r2"]), leaves=st.integers(1, 3), script=SCRIPTS, gap=st.booleans())
    def push_foreign_dedup_roots(self, key: str, leaves: int, script: dict[str, Any], gap: bool) -> None:
        # Two roots of a remove_duplicates type, the older first, that nothing records:
        # whichever runs, the other is its duplicate or superseded, and the leaves of
        # the one that ran are not superseded by a root that never ran.
        bodies = []
        for age in (2, 1):
            params = {"script": {**script, "leaves": leaves}, **new_root_job_params(key, self.clock.now() - age)}
            spec = JobSpecification("rootTwin", params, domain=self.domain, id=self._new_id("root"))
            bodies.append(spec.stamped(self.clock.now()).to_message())
            self.foreign.add(by_job("rootTwin", self.domain, spec.id))
        self._send_foreign("rootTwin", bodies)
        if gap:
            self.clock.advance(1)

    @rule(kind=st.sampled_from(sorted(BAD_BODIES)))
    def send_a_bad_body(self, kind: str) -> None:
        job_id = self._new_id("bad")
        _, queue, text = BAD_BODIES[kind](job_id, self.domain, self.clock.now())
        self.bad.add(key_of(text, by_job) or job_id)  # as the ledger reads it
        self._send_foreign(queue, [text])

    @rule(script=SCRIPTS)
    def reuse_a_job_id(self, script: dict[str, Any]) -> None:
        # Callers choose IDs: the same one in another domain and in another type is another job
        job_id = self._new_id("order")
        self._push([JobSpecification("once", {"script": script}, id=job_id)])
        self._push([JobSpecification("once", {"script": script}, id=job_id, domain=f"{self.domain}b")])
        self._push([JobSpecification("plain", {"script": script}, id=job_id)])

    @rule(job_type=st.sampled_from(["plain", "limited", *DEBOUNCED]), script=SCRIPTS, gap=st.integers(0, 2))
    def push_one_id_twice(self, job_type: str, script: dict[str, Any], gap: int) -> None:
        # a retried request: the same job ID pushed again (within a debounce wait)
        spec = JobSpecification(job_type, {"key": "a", "script": script}, id=self._new_id("again"))
        self._push([spec])
        self.clock.advance(gap)
        self._push([spec])
        self.twice[by_job(job_type, self.domain, spec.id)] = gap

    @rule(key=st.sampled_from(["a", "b"]), seconds=st.sampled_from([5, 30, 90]))
    def a_container_dies_holding_a_lease(self, key: str, seconds: int) -> None:
        # its lease keeps the key full until its deadline: jobs are held back, between their retries too
        now = self.clock.now()
        with contextlib.suppress(JobKitError):
            Leases(self.h.stack.records.table).acquire("limited", f"={key}", 1, now=now, until=now + seconds)

    @rule(first=st.sampled_from([30, 45]), second=st.sampled_from([30, 45]))
    def hold_between_retries(self, first: int, second: int) -> None:
        # A job held back, then run and failed, then held back again on its retry:
        # each hold is shorter than max_held_s (60 s), the two together longer
        spec = JobSpecification("limited", {"key": "c", "script": {"fail": 1}, "n": self._new_id("held")})
        leases = Leases(self.h.stack.records.table)
        with contextlib.suppress(JobKitError):
            leases.acquire("limited", "=c", 1, now=self.clock.now(), until=self.clock.now() + first)
        self._push([spec])
        for _ in range(first // 5 + 4):
            if any(run.job_id == spec.id for run in SCRIPTED):
                break
            self.clock.advance(5)
            self.poll()
        with contextlib.suppress(JobKitError):
            leases.acquire("limited", "=c", 1, now=self.clock.now(), until=self.clock.now() + second)

    @rule(count=st.integers(1, 3), fail_after=st.sampled_from([[], [1], [1, 2]]), child_script=SCRIPTS)
    def push_a_parent(self, count: int, fail_after: list[int], child_script: dict[str, Any]) -> None:
        script = {"children": {"type": "once", "count": count}, "fail_after_push": fail_after}
        parent = JobSpecification("parent", {"script": script, "childScript": child_script})
        self._push([parent])
        stamped = parent.replace(domain=self.domain).stamped(self.clock.now())
        child_script = {"n": 0, "script": child_script}
        children = {
            by_job("once", self.domain, derived_job_id(stamped, JobSpecification("once", {**child_script, "n": n})))
            for n in range(count)
        }
        self.children |= children
        self.parents[by_job("parent", self.domain, stamped.id)] = children
        self.pushed_in[by_job("parent", self.domain, stamped.id)] = self._in_lane(parent).priority

    # -- batches ----------------------------------------------------------------------------

    @rule(
        members=st.lists(st.tuples(st.sampled_from(_BATCHED), SCRIPTS), max_size=4),
        seal=st.booleans(),
        fault=st.sampled_from([None, None, "SendMessageBatch entries", "dynamodb 5xx"]),
    )
    def push_a_batch(self, members: list[tuple[str, dict[str, Any]]], seal: bool, fault: str | None) -> None:
        # An app's batch: members of every option, a parent that pushes children, a root
        # that fans out (its leaves join), sealed now or later; its push may fail in part
        batch_id = self._new_id("batch")
        callbacks = {"on_complete": {"for": batch_id}, "on_success": {"for": batch_id, "ok": True}}
        try:
            batch = self.group.batch(**{k: JobSpecification("reached", v) for k, v in callbacks.items()}, id=batch_id)
        except JobKitError:  # the table is down: no batch
            return
        self.batches[batch_id], self.handles[batch_id] = False, batch
        specs = [self._in_lane(self._member(job_type, script, n)) for n, (job_type, script) in enumerate(members)]
        self.h.jobs += len(specs)
        if fault is not None:
            self.h.faults[fault].remaining = 1
        with contextlib.suppress(JobKitError):  # some sent (JobQueueError), or none (the table is down)
            batch.push(specs)
        if fault is not None:
            self.h.faults[fault].remaining = 0
        if seal:
            self.seal_a_batch(batch_id)

    def _member(self, job_type: str, script: dict[str, Any], n: int) -> JobSpecification:
        if job_type == "parent":
            return JobSpecification(
                "parent", {"script": {**script, "children": {"type": "once", "count": 2}}, "childScript": {}, "n": n}
            )
        if job_type == "leaf":
            root = new_root_job_params(self._new_id("edit"), self.clock.now())
            return JobSpecification("leaf", {"script": {**script, "leaves": 2}, "n": n, **root})
        return JobSpecification(job_type, {"key": "a", "script": script, "n": n})

    @rule(
        first=st.lists(st.tuples(st.sampled_from(_BATCHED), SCRIPTS), min_size=1, max_size=2),
        later=st.lists(st.lists(SCRIPTS, min_size=1, max_size=2), min_size=1, max_size=2),
        fault=st.sampled_from([None, None, "SendMessageBatch entries", "dynamodb 5xx"]),
        step_fault=st.booleans(),
    )
    def push_a_chain(
        self,
        first: list[tuple[str, dict[str, Any]]],
        later: list[list[dict[str, Any]]],
        fault: str | None,
        step_fault: bool,
    ) -> None:
        # An app's chain: a first step of members of every option (a parent's children and a
        # root's leaves join it), then steps of one or two jobs, each pushed when the one before
        # succeeded; its start may fail part way (the app starts it again, at the end)
        chain_id = self._new_id("chain")
        steps = [[self._member(job_type, script, n) for n, (job_type, script) in enumerate(first)]]
        steps += [
            [JobSpecification("step", {"key": "a", "script": s, "n": n}) for n, s in enumerate(jobs)] for jobs in later
        ]
        self.chains[chain_id], self.chains_started[chain_id] = steps, False
        self.h.jobs += sum(map(len, steps))
        self.start_a_chain(chain_id, fault)
        if step_fault:  # a runner pushes a step of two, now, past push's own retries: it pushes it again
            self.h.faults["a chain step's second job"].remaining = 6
            self._drain_everything()
            self.h.faults["a chain step's second job"].remaining = 0

    def start_a_chain(self, chain_id: str, fault: str | None = None) -> None:
        if fault is not None:
            self.h.faults[fault].remaining = 1
        try:
            with contextlib.suppress(JobKitError):  # some sent, or none (the table is down): started again
                self.group.chain(self.chains[chain_id], id=chain_id)
                self.chains_started[chain_id] = True
        finally:
            if fault is not None:
                self.h.faults[fault].remaining = 0

    @precondition(lambda self: any(not sealed for sealed in self.batches.values()))
    @rule(data=st.data())
    def seal_a_batch_later(self, data: st.DataObject) -> None:
        self.seal_a_batch(data.draw(st.sampled_from(sorted(b for b, sealed in self.batches.items() if not sealed))))

    def seal_a_batch(self, batch_id: str) -> None:
        with contextlib.suppress(JobKitError):  # the table is down: the app calls it again (at the end)
            self.handles[batch_id].seal()
            self.batches[batch_id] = True

    @rule(queue=st.sampled_from(QUEUES), uncancel=st.booleans())
    def redrive_a_dlq(self, queue: str, uncancel: bool) -> None:
        # An operator's fix, then `jobkit dlq redrive QUEUE [--uncancel]`: copies, with new message IDs
        try:
            moved = self.h.stack.dead_letters(queue)
        except ClientError:  # an injected fault: the operator tries again later
            return
        # the listing made them visible again, as of now: moto shows them once the clock has passed it
        self.clock.advance(0.01)
        lifted: list[str] = []

        def lift(dead: DeadLetter, message: Mapping[str, Any]) -> None:
            lifter(DECLARATION, self.h.stack.records, self.clock, "model")(dead, message)
            if dead.spec is not None:
                lifted.append(by_job(dead.spec.type, dead.spec.domain, dead.spec.id))

        with contextlib.suppress(ClientError, JobKitError):  # an injected fault: what was not moved stays
            report = redrive(
                self.h.stack.sqs,
                self.h.stack.wiring.directory,
                _scope(queue),
                uncancel=lift if uncancel else None,
            )
            self.h.redriven += report.moved
        for key in lifted:
            self.lifted[key] = (self.clock.now(), self._record())
        for message in moved:
            key = key_of(message["Body"], by_job)
            if key is not None:
                self.redriven[key] = self.clock.now()

    # -- cancellations -----------------------------------------------------------------------

    def _record(self) -> int:
        self.recorded += 1
        return self.recorded

    def _runs_of(self, key: str) -> int:
        return sum(1 for run in SCRIPTED if by_job(run.job_type, run.domain, run.job_id) == key)

    @precondition(lambda self: any(s.type in CANCELLABLE for k, s in self.h.sent.specs.items() if k not in self.bad))
    @rule(data=st.data())
    def cancel_a_job(self, data: st.DataObject) -> None:
        # an app cancels a job it pushed: queued, delayed, waiting, held, retried, dead or done
        keys = [k for k, s in self.h.sent.specs.items() if s.type in CANCELLABLE and k not in self.bad]
        key = data.draw(st.sampled_from(keys))
        spec = self.h.sent.specs[key]
        try:
            self.h.stack.queue_group(spec.domain).cancel(spec.type, spec.id, by="model")
        except JobKitError:  # the table is down: nothing was cancelled
            return
        self.cancels[key] = (self.clock.now(), self._runs_of(key), self._record())
        self.h.cancels += 1

    @rule(
        job_type=st.sampled_from(["plain", "limited", "debounced"]),
        scripts=st.lists(SCRIPTS, min_size=1, max_size=3),
        delay=DELAYS,
        other_domain=OTHER_DOMAIN,
        first_poll=st.booleans(),
    )
    def push_then_cancel_everything(
        self, job_type: str, scripts: list[dict[str, Any]], delay: int | None, other_domain: bool, first_poll: bool
    ) -> None:
        # jobs still queued (or waiting, or delayed) when their type's jobs are cancelled
        group = self._group(other_domain)
        self.h.jobs += len(scripts)
        with contextlib.suppress(JobQueueError):
            group.push(
                [
                    JobSpecification(job_type, {"key": "a", "script": s, "n": n}, delay=delay)
                    for n, s in enumerate(scripts)
                ]
            )
        self.clock.advance(1)
        if first_poll:
            self.poll()
        self.cancel_everything_pushed_before(job_type, other_domain, 0)
        # and one pushed after the cancellation, which it must spare, even when the
        # other domain's jobs are cancelled after it (the type's mark then reaches past it)
        self.clock.advance(1)
        self.h.jobs += 1
        with contextlib.suppress(JobQueueError):
            group.push([JobSpecification(job_type, {"key": "b", "script": {}, "n": self._new_id("after")})])
        self.clock.advance(1)
        self.cancel_everything_pushed_before(job_type, not other_domain, 0)

    @rule(again=st.sampled_from([None, "job", "all"]), wait=st.booleans())
    def cancel_a_dead_job_then_lift_it(self, again: str | None, wait: bool) -> None:
        # an app cancels a job that died; the operator redrives it with --uncancel (and the
        # app, maybe, cancels it or everything pushed until then once more, maybe in the
        # lift's own instant): it runs, unless cancelled again
        spec = JobSpecification("plain", {"script": {"permanent": True}, "n": self._new_id("dead")})
        self._push([spec])
        key = by_job("plain", self.domain, spec.id)
        if key not in self.h.sent.specs:  # its push failed (an injected fault): there is no job to cancel
            return
        for _ in range(3):
            self.poll()
        try:
            self.group.cancel("plain", spec.id, by="model")
        except JobKitError:
            return
        self.cancels[key] = (self.clock.now(), self._runs_of(key), self._record())
        self.h.cancels += 1
        self.clock.advance(1)
        self.redrive_a_dlq("plain", True)
        if wait:
            self.clock.advance(1)
        if again == "job":
            with contextlib.suppress(JobKitError):  # the table is down: nothing was cancelled
                self.group.cancel("plain", spec.id, by="model")
                self.cancels[key] = (self.clock.now(), self._runs_of(key), self._record())
                self.h.cancels += 1
        elif again == "all":
            self.cancel_everything_pushed_before("plain", False, 0)

    @rule(scripts=st.lists(SCRIPTS, min_size=2, max_size=3), first_delay=st.sampled_from([None, 5]))
    def cancel_a_windows_owner(self, scripts: list[dict[str, Any]], first_delay: int | None) -> None:
        # jobs of one debounce key wait behind the latest, which is then cancelled:
        # those that come back after its cancellation must not be folded into it
        specs = [
            JobSpecification("debounced", {"key": "c", "script": s, "n": n}, delay=first_delay if n == 0 else None)
            for n, s in enumerate(scripts)
        ]
        for spec in specs:
            self._push([spec])
            self.clock.advance(1)
        self.poll()
        owner = specs[-1]
        try:
            self.group.cancel("debounced", owner.id, by="model")
        except JobKitError:
            return
        key = by_job("debounced", self.domain, owner.id)
        self.cancels[key] = (self.clock.now(), self._runs_of(key), self._record())
        self.h.cancels += 1

    @rule(job_type=st.sampled_from(CANCELLABLE), other_domain=OTHER_DOMAIN, back_s=st.sampled_from([0, 3]))
    def cancel_everything_pushed_before(self, job_type: str, other_domain: bool, back_s: int) -> None:
        group = self._group(other_domain)
        before = self.clock.now() - back_s
        try:
            group.cancel_all(job_type, pushed_before=before, by="model")
        except JobKitError:
            return
        covered = {
            key: self._runs_of(key)
            for key, spec in self.h.sent.specs.items()
            if (spec.type, spec.domain) == (job_type, group.domain)
        }
        self.watermarks.append((job_type, group.domain, before, self.clock.now(), self._record(), covered))
        self.h.cancels += 1

    @rule(queue=st.sampled_from(QUEUES))
    def redrive_a_dlq_natively(self, queue: str) -> None:
        # What SQS's StartMessageMoveTask does (moto in-process lacks it): each dead
        # letter becomes a new message on the queue, with the attributes it had
        dlq, url = self.h.queue_url(queue, dlq=True), self.h.queue_url(queue)
        sqs = self.h.stack.sqs
        with contextlib.suppress(ClientError):  # an injected fault: what was not moved stays in the DLQ
            while messages := sqs.receive_message(
                QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
            ).get("Messages", []):
                for message in messages:
                    sqs.send_message(
                        QueueUrl=url,
                        MessageBody=message["Body"],
                        MessageAttributes=message.get("MessageAttributes", {}),
                    )
                    key = key_of(message["Body"], by_job)
                    if key is not None:
                        self.redriven[key] = self.clock.now()
                    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"])

    # -- running ----------------------------------------------------------------------------

    def _act(self, action: Callable[[], object]) -> None:
        """Run an action that delivers messages; a crash, or a fault during it,
        marks every job it received as disturbed."""
        fired_before = self.h.fired()
        self.h.received.clear()
        try:
            action()
        except SimulatedCrash as crash:
            self._crashed(crash)
        if self.h.fired() != fired_before:
            self.lost |= self.h.received

    def _crashed(self, crash: SimulatedCrash) -> None:
        key = by_job(crash.job_type, crash.domain, crash.job_id)
        self.crashed.add(key)
        self.unreported |= set(self.h.last_batch)
        self.lost |= set(self.h.last_batch) - {key}

    def _receive(self, queue: str) -> list[dict[str, Any]]:
        try:
            response = self.h.stack.sqs.receive_message(
                QueueUrl=self.h.queue_url(queue),
                MaxNumberOfMessages=DECLARATION.queues[DECLARATION.lanes[queue].queue].batch_size,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        except ClientError:  # an injected fault
            return []
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    @rule()
    def poll(self) -> None:
        self.h.steps += 1
        self._act(self.h.stack.poll_once)

    @rule(queue=st.sampled_from(QUEUES))
    def deliver_twice(self, queue: str) -> None:
        def twice() -> None:
            messages = self._receive(queue)
            if messages:
                self.h.steps += 1
                self.copied.update(key_of(m["Body"], by_job) or "" for m in messages)
                self.h.stack.mappings[queue].deliver(messages)
                self.h.stack.mappings[queue].deliver(messages)

        self._act(twice)

    @rule(queue=st.sampled_from(QUEUES))
    def crash_before_reporting(self, queue: str) -> None:
        # The invocation received a batch and died before it reported anything:
        # the messages reappear after their visibility timeout, one receive spent.
        self.lost.update(key_of(m["Body"], by_job) or "" for m in self._receive(queue))

    @precondition(lambda self: any(key not in self.bad for key in self.h.sent.specs))
    @rule(data=st.data())
    def send_a_copy(self, data: st.DataObject) -> None:
        # SQS's at-least-once delivery, as a second message with the same body, to
        # the queue it was sent to (a bad body's copy would be a job of its own).
        keys = [key for key in self.h.sent.specs if key not in self.bad]  # in push order: replayable
        key = data.draw(st.sampled_from(keys))
        spec = self.h.sent.specs[key]
        try:
            self.h.stack.sqs.send_message(
                QueueUrl=self.h.queue_url(lane_key(DECLARATION.types[spec.type].queue, spec.priority)),
                MessageBody=self.h.sent.bodies[key],
                MessageAttributes={TYPE_ATTRIBUTE: string_attribute(spec.type)},
            )
        except ClientError:  # an injected fault: no copy
            return
        self.copied.add(key)

    @rule(seconds=st.sampled_from([1, 11, 61, 901]))
    def let_time_pass(self, seconds: int) -> None:
        # 11 s: past any claim's lease (the 10 s timeout); 61 s: past the visibility timeout.
        self.clock.advance(seconds)

    # -- faults -----------------------------------------------------------------------------

    @rule(
        fault=st.sampled_from(["dynamodb throttled", "dynamodb 5xx"]),
        calls=st.integers(1, 8),
    )
    def dynamodb_outage(self, fault: str, calls: int) -> None:
        self.h.faults[fault].remaining = calls

    @rule(
        fault=st.sampled_from(
            [
                "SendMessageBatch",
                "SendMessageBatch entries",
                "SendMessage to a DLQ",
                "SendMessage to re-enqueue",
                "ChangeMessageVisibility",
                "DeleteMessage",
                "ReceiveMessage",
                "DeleteMessageBatch",
            ]
        ),
        calls=st.integers(1, 3),
    )
    def sqs_fault(self, fault: str, calls: int) -> None:
        self.h.faults[fault].remaining = calls

    @rule(fault=st.sampled_from(["PutObject", "GetObject", "DeleteObject"]), calls=st.integers(1, 3))
    def s3_fault(self, fault: str, calls: int) -> None:
        self.h.faults[fault].remaining = calls

    # -- the end ----------------------------------------------------------------------------

    def teardown(self) -> None:
        # The next example's reset empties the queues, whatever happened here.
        self._drain_everything()  # faults still armed run out on the way
        self.h.disarm()
        # the app calls again what raised: a seal the table refused (every batch is sealed in the end)
        if not all(self.batches.values()):
            for batch_id in [b for b, sealed in self.batches.items() if not sealed]:
                self.seal_a_batch(batch_id)
            self._drain_everything()
        if not all(self.chains_started.values()):
            for chain_id in [c for c, started in self.chains_started.items() if not started]:
                self.start_a_chain(chain_id)
            self._drain_everything()
        self._check()

    def _drain_everything(self) -> None:
        for _ in range(100):
            self._act(self.h.stack.drain)
            if self.h.empty():
                return
            self.clock.advance(61)  # a receive failed: drain stopped with messages left
        raise AssertionError("the queues did not drain")

    def _check(self) -> None:
        sent = self.h.sent.specs
        # moto shows a message again only once the clock has passed its visible_at; a dead
        # letter an operator's listing or redrive received and could not release (an injected
        # fault) is hidden for their visibility timeout, and comes back after it: wait for it
        self.clock.advance(REDRIVE_VISIBILITY_S + 1)
        dead = [m for queue in QUEUES for m in self.h.stack.dead_letters(queue)]
        evidence = fates(self.h.sent.keys, self.h.stack.results.results, SCRIPTED, dead, key=by_job)
        keys = set(self.h.sent.keys)
        assert set(evidence) == keys, f"evidence about jobs nobody pushed: {set(evidence) - keys}"
        # a batch member whose end its batch could not count (a table outage): its message went
        # back, and its next delivery ran it again (it is no deliver_once), as after a crash
        sent_back = {by_job(r.job_type, r.domain, r.job_id or "") for r in self.h.stack.results.results if r.send_back}
        self.lost |= sent_back
        # a receive whose params the bucket could not give (an injected fault) spent an attempt, unrun
        unfetched = {
            by_job(r.job_type, r.domain, r.job_id or "")
            for r in self.h.stack.results.results
            if (r.error or "").startswith("PayloadUnavailable")
        }
        self.lost |= unfetched
        disturbed = self.lost | self.crashed
        for key in self.h.sent.keys:
            fate = evidence[key]
            assert fate.category is not Category.LOST, f"lost: {fate.describe()}"
            if key in self.bad:
                self._check_poison(fate)
                continue
            spec = sent[key]
            if fate.dead_and_done:
                # Two deliveries, each ending its own way (one dead-lettered, one
                # run or de-duplicated later): only if the model made a second one.
                allowed = disturbed | self.copied | self.children | set(self.redriven) | set(self.twice)
                assert key in allowed, f"dead-lettered although done: {fate.describe()}"
            for message in fate.dead_letters:
                self._check_dead_letter(message, fate, disturbed)
            if key not in self.lost and key not in self.redriven:
                self._check_script(spec, fate)
        self._check_duplicates(evidence)
        self._check_debounces(evidence)
        self._check_debounced_run_once(evidence)
        self._check_holds()
        self._check_supersessions()
        self._check_redeliveries(evidence)
        self._check_release_times()
        self._check_children(evidence)
        self._check_lanes()
        self._check_redrives(evidence)
        self._check_cancellations(evidence)
        self._check_chains()
        self._check_batches(evidence)

    def _check_chains(self) -> None:
        """Each chain pushed a step only after the step before had ended with no
        failure, and pushed it once that step had (its batch is then checked as
        any other). A chain stops only at a step with a failure, or one that waits."""
        batches = self.h.stack.records.batches
        for chain_id, steps in self.chains.items():
            assert self.chains_started[chain_id], f"chain {chain_id}: never started"
            before = None
            for n in range(1, len(steps) + 1):
                record = batches.read(BatchRef(step_batch_id(chain_id, n), self.domain))
                if before is not None:
                    ok = before.counts.pending == 0 and before.counts.failures == 0
                    assert (record is not None) == ok, (
                        f"chain {chain_id}: step {n - 1} ended {before.counts}, step {n} "
                        + ("pushed" if record is not None else "never pushed")
                    )
                if record is None:
                    break
                assert record.sealed_at is not None, f"chain {chain_id}: step {n} not sealed"
                if n > 1:  # its jobs push none: each counted in once, however often its push was made
                    assert record.counts.added == len(steps[n - 1]), f"chain {chain_id}: step {n}: {record.counts}"
                self.batches.setdefault(record.ref.batch_id, True)  # checked as every batch is
                before = record

    def _check_batches(self, evidence: dict[str, Fate]) -> None:
        """Each batch counted its members once, and pushed each callback once, when it
        should have: ``on_complete`` once every member ended (after the seal),
        ``on_success`` then if none failed (or once the failures were redriven and
        succeeded), and nothing while a member was pending. A batch waits only
        for a member whose end a table fault kept from being counted, in a DLQ,
        or one never sent that a table fault kept from being taken back out."""
        sent = self.h.sent.specs
        disturbed = self.lost | self.crashed | self.copied | set(self.redriven) | set(self.twice) | self.children
        table_faults = self._table_faults() > self.table_faults_before
        for batch_id in self.batches:
            ref = BatchRef(batch_id, self.domain)
            record = self.h.stack.records.batches.read(ref)
            assert record is not None and record.sealed_at is not None, f"batch {batch_id}: not sealed"
            fired = [p["batch"] for _, _, p in CALLBACKS if p["batch"]["id"] == batch_id]
            names = [f["callback"] for f in fired]
            assert all(names.count(n) <= 1 for n in names), f"batch {batch_id}: a callback ran twice: {fired}"
            assert all(f["pending"] == 0 for f in fired), f"batch {batch_id}: a callback while pending: {fired}"
            members = {key for key, spec in sent.items() if spec.batch == batch_id and spec.domain == self.domain}
            states = {
                by_job(m.job_type, self.domain, m.job_id): state
                for m, state in self.h.stack.records.batches.members(ref)
                if state != "withdrawn"
            }
            assert members <= set(states), f"batch {batch_id}: sent, never counted in: {members - set(states)}"
            for key in [k for k in members if sent[k].type == "parent" and evidence[k].succeeded]:
                # a member's children joined its batch (the IDs a parent's pushes derive)
                children = {
                    by_job(
                        "once", self.domain, derived_job_id(sent[key], JobSpecification("once", {"n": n, "script": {}}))
                    )
                    for n in range(2)
                }
                assert children <= members, f"batch {batch_id}: children of {key} not in it: {children - members}"
            for key, state in states.items():
                if key not in members:  # counted in, never sent: its push failed, and so did taking it out
                    assert state == PENDING and table_faults, f"batch {batch_id}: {key} unsent yet {state}"
                    continue
                fate = evidence[key]
                if state == PENDING:
                    # In a DLQ, its end not counted: moved there by SQS's redrive policy (its runs
                    # died), or dead-lettered by a runner that could not count it (a table fault),
                    # or that died before it counted (its invocation crashed)
                    moved = any(not reason(m) for m in fate.dead_letters)
                    died = key in disturbed | self.unreported
                    why = moved or table_faults or died
                    assert fate.dead_letters and why, f"batch {batch_id} waits for {fate.describe()}"
                    continue
                assert state in ENDS, (batch_id, key, state)
                expected = _END_OF.get(fate.category)
                if key not in disturbed and expected is not None:
                    assert state in expected, f"batch {batch_id} counted {state}: {fate.describe()}"
            if record.counts.pending == 0:
                pushed = {
                    name
                    for name in ("on_complete", "on_success")
                    if getattr(record, name) is not None and (name == "on_complete" or record.counts.failures == 0)
                }
                assert set(record.fired) == pushed, f"batch {batch_id}: {record.counts}, pushed {set(record.fired)}"
                for name in pushed - {"on_success" if is_next_step(record.on_success) else ""}:
                    # each ran once; or its message shared an invocation that died, and is in a DLQ
                    key = by_job("reached", self.domain, callback_spec(record, name).id)
                    ran = names.count(name) == 1
                    assert ran or evidence[key].dead_letters, f"batch {batch_id}: {name} did not run: {evidence[key]}"
                if "on_complete" in names:
                    # (a member that failed, redriven after the end, may push children that join then)
                    assert fired[names.index("on_complete")]["total"] <= record.counts.added
            else:
                assert not fired and not record.fired, f"batch {batch_id} pending {record.counts.pending}: {names}"
            self.h.batches += 1

    def _check_poison(self, fate: Fate) -> None:
        assert not fate.runs and fate.category is Category.DEAD_LETTERED, f"a bad body ran: {fate.describe()}"
        for message in fate.dead_letters:
            attributes = reason(message)
            assert not attributes or attributes["jobkit.reason"] == "poison", fate.describe()

    def _check_children(self, evidence: dict[str, Fate]) -> None:
        """A deliver-once child of a parent that failed after pushing it was pushed
        again with the same ID: it succeeded at most once. (Children are expected of
        a parent that succeeded: one never sent (its push met an SQS fault), or whose
        every attempt died or failed to push, pushed none.)"""
        expected = {
            key
            for parent, kids in self.parents.items()
            if parent in evidence and evidence[parent].succeeded
            for key in kids
        }
        for key in expected - self.lost - self.copied:
            assert key in evidence, f"a child was not pushed with the ID derived from its parent's: {key}"
            successes = [run for run in evidence[key].runs if run.outcome == "succeeded"]
            assert len(successes) <= 1, f"a deliver-once child ran twice: {evidence[key].describe()}"

    def _check_lanes(self) -> None:
        """A job stays in the lanes it was pushed to: each message of it sent by
        other means than a push (a runner's hops, holds, waits, hand-backs and DLQ
        copies; an operator's redrive) went to one of them, and each run of it
        ran in one. A parent's children were pushed to its lane."""
        pushed = self.h.pushed_lanes
        self.h.lane_runs += sum(1 for run in SCRIPTED if run.priority is not None)
        self.h.lane_resends += sum(1 for lanes in self.h.sent_lanes.values() if lanes - {None})
        for key, lanes in self.h.sent_lanes.items():
            if key in pushed:  # (a copy the model made of a foreign producer's body: no push of it)
                assert lanes <= pushed[key], f"{key} sent to lanes {lanes}, pushed to {pushed[key]}"
        for run in SCRIPTED:
            key = by_job(run.job_type, run.domain, run.job_id)
            if key in pushed:
                assert run.priority in pushed[key], f"{key} ran in lane {run.priority}, pushed to {pushed[key]}"
        for parent, kids in self.parents.items():
            for key in kids & set(pushed):
                lane = self.pushed_in[parent]
                assert pushed[key] == {lane}, f"{key} pushed to {pushed[key]}, its parent's lane is {lane}"

    def _check_redrives(self, evidence: dict[str, Fate]) -> None:
        """A redriven job starts its attempts again: its first run after the redrive is attempt 1."""
        for key, at in self.redriven.items():
            if key in self.lost or key in self.bad or key not in evidence:
                continue
            after = [run for run in evidence[key].runs if run.started_at >= at]
            assert not after or after[0].attempt == 1, f"redriven with attempts used: {evidence[key].describe()}"

    def _cancelled_at(self, key: str) -> float | None:
        """When the model recorded a cancellation that covers a push of the job (the latest)."""
        pushed, spec = self.h.sent.enqueue_times[key], self.h.sent.specs[key]
        times = [self.cancels[key][0]] if key in self.cancels and any(e <= self.cancels[key][0] for e in pushed) else []
        times += [
            at
            for t, d, before, at, *_ in self.watermarks
            if (t, d) == (spec.type, spec.domain) and any(e <= before for e in pushed)
        ]
        return max(times, default=None)

    def _cancelled_since(self, key: str, number: int) -> bool:
        """Whether the model recorded a cancellation that covers a push of the job after ``number``."""
        pushed, spec = self.h.sent.enqueue_times[key], self.h.sent.specs[key]
        own = key in self.cancels and self.cancels[key][2] > number and any(e <= self.cancels[key][0] for e in pushed)
        return own or any(
            (t, d) == (spec.type, spec.domain) and n > number and any(e <= before for e in pushed)
            for t, d, before, _, n, _ in self.watermarks
        )

    def _check_cancellations(self, evidence: dict[str, Fate]) -> None:
        """A cancellation is true, and honoured: every cancelled result has one that
        covers its push, and no push a cancellation covers starts a run after it was
        recorded, but when the runner could not read the table (fail-open, said so)."""
        pushed = self.h.sent.enqueue_times
        sent = self.h.sent.specs

        def covered(key: str) -> bool:
            spec, first = sent[key], min(pushed[key])
            if key in self.cancels and self.cancels[key][0] >= first:
                return True
            return any((t, d) == (spec.type, spec.domain) and before >= first for t, d, before, *_ in self.watermarks)

        # fail-open: the runner could not read the table, ran the job, and said so (or its batch died)
        unread = self.unreported | {
            by_job(r.job_type, r.domain, r.job_id or "") for r in self.h.stack.results.results if r.dedup_unavailable
        }
        for at, result in self.h.timed:
            if result.outcome is Outcome.CANCELLED:
                self.h.cancelled += 1
                key = by_job(result.job_type, result.domain, result.job_id or "")
                assert covered(key), f"cancelled with no cancellation that covers it: {evidence[key].describe()}"
                # a push an operator redrove with --uncancel runs, unless cancelled again after the lift
                lifted = self.lifted.get(key)
                if lifted is not None and at >= lifted[0] and key not in self.twice:
                    again = self._cancelled_since(key, lifted[1])
                    assert again, f"cancelled after its lift: {evidence[key].describe()}"
        honoured = [(key, at, runs, n) for key, (at, runs, n) in self.cancels.items()]
        honoured += [
            (key, at, runs, n)
            for t, d, before, at, n, jobs in self.watermarks
            for key, runs in jobs.items()
            if any(e <= before for e in pushed.get(key, ()))
        ]
        for key, at, runs_then, n in honoured:
            lifted_after = key in self.lifted and self.lifted[key][1] > n
            if key in unread or lifted_after or any(e > at for e in pushed.get(key, ())):
                continue  # read nothing (fail-open), lifted by a redrive since, or pushed again after it
            assert self._runs_of(key) == runs_then, f"ran after its cancellation at {at}: {evidence[key].describe()}"

    def _check_dead_letter(self, message: dict[str, Any], fate: Fate, disturbed: set[str]) -> None:
        attributes = reason(message)
        if attributes:
            allowed = {"non_retryable", "attempts_exhausted"}
            if fate.key.startswith("limited/"):
                allowed.add("held_too_long")  # a table outage outlasted max_held_s
            if attributes["jobkit.errorClass"] in INJECTED_SQS_ERRORS and "could not re-enqueue" in attributes.get(
                "jobkit.error", ""
            ):
                allowed.add("internal_error")  # an injected fault failed its hop on the last receive SQS allows
            if attributes["jobkit.errorClass"] == "PayloadUnavailable" and fate.key in disturbed:
                allowed.add("unavailable")  # an injected fault kept its params from its last receive
            assert attributes["jobkit.reason"] in allowed, attributes
            assert attributes["jobkit.errorClass"] and attributes["jobkit.error"], attributes
            return
        # Moved by SQS's redrive policy: only where the runner could not act.
        spec = self.h.sent.specs[fate.key]
        has_records = self.h.stack.journal().runs(JobRef(spec.type, spec.domain, spec.id)) != JobRuns()
        assert has_records or fate.key in disturbed, f"redriven without a trace: {fate.describe()}"

    def _check_script(self, spec: JobSpecification, fate: Fate) -> None:
        """An undisturbed job ends as its script says (unless de-duplicated or cancelled)."""
        if fate.category in (Category.DUPLICATE, Category.SUPERSEDED, Category.DEBOUNCED, Category.CANCELLED):
            return
        reasons = {reason(m).get("jobkit.reason") for m in fate.dead_letters}
        again = self.lost | self.copied | self.crashed | self.children | set(self.redriven) | set(self.twice)
        if reasons == {"held_too_long"}:
            # it may have failed attempts before it was held; it never succeeded
            assert not fate.succeeded or fate.key in again, f"held too long, yet succeeded: {fate.describe()}"
            return  # a table outage outlasted max_held_s: it never ran, and the DLQ says why
        script = spec.params.get("script") or {}
        limit = DECLARATION.types[spec.type].max_attempts
        failing = {*script.get("crash", ()), *script.get("fail_after_push", ())}
        can_succeed = not script.get("permanent") and any(
            attempt > int(script.get("fail", 0)) and attempt not in failing for attempt in range(1, limit + 1)
        )
        if can_succeed:
            assert fate.category is Category.SUCCEEDED, f"should have succeeded: {spec.params} {fate.describe()}"
            return
        assert fate.category is Category.DEAD_LETTERED, f"should be dead-lettered: {spec.params} {fate.describe()}"
        if by_job(spec.type, spec.domain, spec.id) not in self.crashed:
            expected = "non_retryable" if script.get("permanent") else "attempts_exhausted"
            if fate.key in again:
                # a second delivery (a copy) may be held past max_held_s while the first fails
                reasons.discard("held_too_long")
            assert reasons == {expected}, fate.describe()

    def _check_duplicates(self, evidence: dict[str, Fate]) -> None:
        sent = self.h.sent.specs
        successes = [
            (sent[fate.key].dedup_hash(IGNORED[run.job_type]), run.started_at)
            for fate in evidence.values()
            for run in fate.runs
            if run.outcome == "succeeded" and run.job_type in IGNORED and fate.key in sent
        ]
        for result in self.h.stack.results.results:
            if result.outcome is Outcome.DUPLICATE:
                job = by_job(result.job_type, result.domain, result.job_id or "")
                spec = sent[job]
                # Which push of a re-pushed ID this was, the result does not say: the earliest
                enqueued = min(self.h.sent.enqueue_times[job])
                key = spec.dedup_hash(IGNORED[spec.type])
                assert any(k == key and started > enqueued for k, started in successes), (
                    f"dropped as a duplicate with no twin that started after {enqueued} and succeeded: "
                    f"{evidence[job].describe()}"
                )

    def _check_debounces(self, evidence: dict[str, Fate]) -> None:
        """A debounced job's reason is true: it names a job of its type, domain and
        key, pushed no earlier, that covers it: that job succeeded in a run that
        began after the debounced job was ready (accepted by SQS, and released),
        or is dead-lettered (its failure stands for both), or is a duplicate of
        a run of the key that began after the job was pushed (duplicates count
        from the push), or was debounced in turn by a job that covers
        it. An owner that was superseded, or never ran, covers nothing; neither
        does a run that began before the job was sent (a producer's slow clock)
        or before its release time. A debounced delivery of a job that is
        itself dead-lettered, by another delivery of its ID, is not lost
        either: the dead letter stands for it, with its reason."""
        sent = self.h.sent.specs
        pushed = self.h.sent.enqueue_times
        accepted = self.h.sent.accepted_times
        debounced_by: dict[str, set[str]] = {}
        debounced_at: dict[str, float] = {}  # when the runner last reported it debounced
        for at, result in self.h.timed:
            if result.outcome is Outcome.DEBOUNCED:
                job = by_job(result.job_type, result.domain, result.job_id or "")
                debounced_by.setdefault(job, set()).add(self._owner(result))
                debounced_at[job] = at

        def window(key: str) -> tuple[str, str | None, Any]:
            spec = sent[key]
            return spec.type, spec.domain, spec.params.get("key")

        def runs_after(key: str, at: float) -> bool:
            return any(run.started_at >= at and run.outcome == "succeeded" for run in evidence[key].runs)

        def ready(key: str) -> float:
            release = sent[key].release_at
            return max(min(accepted[key]), release if release is not None else 0.0)

        def covers(owner: str, job: str, seen: set[str]) -> bool:
            if owner not in sent or window(owner) != window(job) or max(pushed[owner]) < min(pushed[job]):
                return False  # another type, domain or key, or pushed before the job it debounced
            fate, at = evidence[owner], ready(job)
            if runs_after(owner, at) or fate.dead_letters:
                return True
            cancelled_at = self._cancelled_at(owner)
            if fate.cancelled and cancelled_at is not None and (debounced_at[job] <= cancelled_at or job in self.lost):
                return True  # folded into the owner's run before that run was cancelled
            # a twin of its key ran after the job was pushed: the owner was a duplicate of it, and a
            # duplicate counts from the push, not the release (remove_duplicates: an identical job
            # that started after it was enqueued and succeeded)
            if fate.deduplicated and any(runs_after(k, min(accepted[job])) for k in sent if window(k) == window(job)):
                return True
            seen = seen | {owner}
            return any(covers(next_owner, job, seen) for next_owner in debounced_by.get(owner, set()) - seen)

        def died_after(key: str, at: float) -> bool:
            return bool(evidence[key].dead_letters) and any(run.started_at >= at for run in evidence[key].runs)

        def window_ran_for(job: str) -> bool:
            # the window's work was done for it: a job of its window, pushed no earlier,
            # succeeded in a run that began after it was ready, or ran then and was
            # dead-lettered (its failure stands for both), whichever job the reason named:
            # an owner may be superseded after a later job took its window over; or the
            # job itself did (another push of its ID ran)
            return any(
                window(k) == window(job)
                and max(pushed[k]) >= min(pushed[job])
                and (runs_after(k, ready(job)) or died_after(k, ready(job)))
                for k in sent
            )

        for job, owners in debounced_by.items():
            itself_dead = bool(evidence[job].dead_letters)
            assert itself_dead or window_ran_for(job) or any(covers(owner, job, {job} - {owner}) for owner in owners), (
                f"debounced by {owners}, which did not run for it: {evidence[job].describe()}; "
                + "; ".join(evidence[o].describe() for o in owners if o in evidence)
            )

    @staticmethod
    def _owner(result: RecordResult) -> str:
        """The job a debounced result names as its owner (by type, domain and ID)."""
        reason = result.reason or ""
        if reason.startswith("another delivery of this job"):
            return by_job(result.job_type, result.domain, result.job_id or "")
        named = reason.removeprefix("job ").removesuffix(" was pushed later")
        domain, _, job_id = named.rpartition("/") if "/" in named else ("", "", named)
        return by_job(result.job_type, domain or None, job_id)

    def _check_debounced_run_once(self, evidence: dict[str, Fate]) -> None:
        """Of the jobs of one key pushed within the wait, one runs: a debounced job
        pushed once, or twice within the wait, succeeded at most once (unless the
        model itself delivered it again)."""
        again = self.lost | self.copied | self.crashed | set(self.redriven)
        for key, spec in self.h.sent.specs.items():
            if spec.type not in DEBOUNCED or key in again or self.twice.get(key, 0) >= 3:
                continue
            successes = [run for run in evidence[key].runs if run.outcome == "succeeded"]
            assert len(successes) <= 1, f"a debounced job ran twice: {evidence[key].describe()}"

    def _check_holds(self) -> None:
        """A job dead-lettered as held_too_long was held back, in holds with
        nothing between them (no run, no other outcome), for max_held_s."""
        timeline: dict[str, list[tuple[float, RecordResult]]] = {}
        for at, result in self.h.timed:
            timeline.setdefault(by_job(result.job_type, result.domain, result.job_id or ""), []).append((at, result))
        for key, events in timeline.items():
            if key in self.copied | self.twice.keys() | self.lost | self.crashed:
                continue  # two messages of one job hold back apart; a batch that died reported no holds
            for index, (at, result) in enumerate(events):
                if result.outcome is not Outcome.DEAD_LETTERED or "HeldTooLong" not in (result.error or ""):
                    continue
                since = at
                for earlier_at, earlier in reversed(events[:index]):
                    if earlier.outcome is not Outcome.LIMITED:
                        break
                    since = earlier_at
                limit = DECLARATION.types[result.job_type].max_held_s
                assert at - since >= limit, (
                    f"held_too_long after {at - since:.0f} s held: {[(t, r.outcome, r.error) for t, r in events]}"
                )

    def _check_supersessions(self) -> None:
        """A superseded job has a newer root timestamp of the same type, domain and
        signature that was recorded (a root pushed through jobkit, or a virtual
        root) or that a job carrying it ran with: a root that nothing recorded and
        that never ran (a duplicate, a poison body) supersedes nothing."""
        sent = self.h.sent.specs
        ran = {by_job(run.job_type, run.domain, run.job_id) for run in SCRIPTED}
        roots = [
            (s.type, s.domain, s.root_job_signature, s.root_job_timestamp)
            for key, s in sent.items()
            if s.has_root_job_params()
            and key not in self.bad
            and (key in ran or (s.is_root_job() and key not in self.foreign))
        ]
        roots += self.virtual_roots
        for result in self.h.stack.results.results:
            if result.outcome is Outcome.SUPERSEDED:
                spec = sent[by_job(result.job_type, result.domain, result.job_id or "")]
                assert any(
                    (job_type, domain, signature) == (spec.type, spec.domain, spec.root_job_signature)
                    and (timestamp or 0) > (spec.root_job_timestamp or 0)
                    for job_type, domain, signature, timestamp in roots
                ), f"superseded with no newer root that was recorded or ran: {spec.params}"

    def _check_redeliveries(self, evidence: dict[str, Fate]) -> None:
        for result in self.h.stack.results.results:
            if result.outcome is Outcome.REDELIVERED:
                key = by_job(result.job_type, result.domain, result.job_id or "")
                fate = evidence[key]
                if "removed when its job ended" in (result.reason or ""):
                    # a large job's late copy: an earlier delivery ended it (said so, or died unreported after)
                    ended = any(o in (Outcome.SUCCEEDED, Outcome.DUPLICATE, Outcome.SUPERSEDED) for o in fate.outcomes)
                    assert ended or key in self.unreported | self.lost, f"ended unseen: {fate.describe()}"
                    continue
                assert fate.succeeded, f"redelivered before it ran: {fate.describe()}"

    def _check_release_times(self) -> None:
        sent = self.h.sent.specs
        for run in SCRIPTED:
            release = sent[by_job(run.job_type, run.domain, run.job_id)].release_at
            assert release is None or run.started_at >= release, f"ran before its release: {run}"
        for result in self.h.stack.results.results:
            spec = sent.get(by_job(result.job_type, result.domain, result.job_id or ""))
            release = spec.release_at if spec is not None else None
            if result.started_at is not None and release is not None:
                assert result.started_at >= release, f"ran before its release: {result}"


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.stop()


def test_every_pushed_job_ends_in_exactly_one_terminal_category(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Thousands of retry warnings would only slow it down: a failure's message
    # describes the job's runs, outcomes and dead letters itself.
    caplog.set_level(logging.CRITICAL, logger="jobkit")
    JobModel.harness = harness
    began = time.perf_counter()
    run_state_machine_as_test(
        JobModel,
        settings=settings(
            max_examples=EXAMPLES,
            deadline=None,
            stateful_step_count=12,
            database=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    elapsed = time.perf_counter() - began
    print(
        f"\nmodel: {harness.examples} examples, {harness.steps} delivering steps, {harness.jobs} jobs pushed, "
        f"in {elapsed:.1f} s; {harness.cancels} cancellations, {harness.cancelled} jobs cancelled;"
        f" {harness.redriven} dead letters redriven by copy; {harness.batches} batches;"
        f" {harness.lane_runs} runs in a priority lane, {harness.lane_resends} jobs sent to one again;"
        f" {harness.large()} jobs' params in the payload bucket;"
        f" faults injected: {harness.injected()}"
    )
    assert harness.examples >= EXAMPLES
