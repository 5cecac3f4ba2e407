"""A model-based property test: random interleavings of pushes, failures,
crashes, duplicate deliveries, lease expiries and AWS faults, against the real
runner on moto, and what must hold once everything has drained.

Each example is a short program of rules: push plain jobs, remove-duplicates
twins, deliver-once jobs, root jobs that fan out and stale leaves; run a
polling round; deliver the same received batch twice; re-send a copy of a
message; receive a batch and drop it (an invocation that died before it
reported); let time pass (past a claim's lease, past a visibility timeout);
make DynamoDB fail for a while; make one SQS operation fail; make some entries
of the next SendMessageBatch fail. Each job's script says how its attempts go:
succeed, fail N times then succeed, fail for good, or kill the invocation
(``testjobs.SimulatedCrash``, a BaseException, after the claims were taken).

Then the faults stop, the clock runs past every delay and visibility timeout
until the queues are empty, and the ledger must show, for every job SQS
accepted from a push:

- it ended in a terminal category: succeeded, duplicate (of a successful run,
  or a deliver-once redelivery after a success), superseded, or dead-lettered;
- a dead letter says why: jobkit's reason attributes, or, when SQS's redrive
  policy moved it, the job's failure records, or a delivery the model lost;
- a job is in a DLQ *and* done only if the model lost a delivery of it (a
  crashed batch, a failed delete: SQS's at-least-once);
- each de-duplication is justified: a duplicate has a twin that started after
  it was enqueued and succeeded; a superseded leaf has a newer root; a
  redelivery follows a success of the same job;
- the outcome matches the script when nothing disturbed the job: a job that
  can succeed within its attempts is not dead-lettered, a job that cannot is;
- no attempt started before the job's release time.

One local stack serves every example (creating one costs half a second): each
example pushes to a fresh domain, which is part of every dedup key, and leaves
the queues empty.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from ledger import Category, Fate, SentJobs, fates, job_id_of, reason

from jobkit import JobSpecification
from jobkit.clock import VirtualClock
from jobkit.config import load_declaration
from jobkit.errors import JobKitError, JobQueueError
from jobkit.local import LocalStack
from jobkit.local.moto_time import has_receivable
from jobkit.local.stack import ACCOUNT_ID
from jobkit.outcome import Outcome
from jobkit.record_keys import JobRef
from jobkit.records import JobRuns
from jobkit.spec import new_root_job_params
from jobkit.sqs import TYPE_ATTRIBUTE, string_attribute

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
from testjobs import SCRIPTED, SimulatedCrash

EXAMPLES = 200
EXAMPLE_SPACING_S = 100_000  # far apart: an example's messages, claims and roots never meet the next's
DECLARATION = load_declaration(FIXTURES / "reliability.toml")
QUEUES = sorted(DECLARATION.queues)
TWIN_IGNORED = DECLARATION.types["twin"].remove_duplicates_ignore_params

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


class Harness:
    """The stack, the ledger's hooks and the faults, shared by every example."""

    def __init__(self) -> None:
        self.clock = VirtualClock(START)
        self.stack = LocalStack(DECLARATION, clock=self.clock, seed=7).start()
        testjobs.use_clock(self.clock)
        sqs, dynamodb = self.stack.sqs, self.stack.dynamodb
        self.sent = SentJobs(sqs)
        self.last_batch: list[str] = []
        self.received: set[str] = set()
        sqs.meta.events.register("after-call.sqs.ReceiveMessage", self._received)
        self.faults: dict[str, FailCalls | FailBatchEntries] = {
            "dynamodb throttled": FailCalls(dynamodb, "dynamodb.*", codes=[DYNAMODB_THROTTLE, DYNAMODB_CAPACITY]),
            "dynamodb 5xx": FailCalls(dynamodb, "dynamodb.*", codes=[DYNAMODB_SERVER_ERROR]),
            "SendMessageBatch": FailCalls(sqs, "sqs.SendMessageBatch", codes=[SQS_THROTTLE, SQS_SERVER_ERROR]),
            "SendMessageBatch entries": FailBatchEntries(sqs, lambda entry: int(entry["Id"]) % 2 == 0),
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
        }
        self.disarm()
        self.examples = 0
        self.steps = 0
        self.jobs = 0

    def _received(self, parsed: dict[str, Any], **_: Any) -> None:
        ids = [job_id_of(m["Body"]) or m["MessageId"] for m in parsed.get("Messages", [])]
        if ids:
            self.last_batch = ids
            self.received.update(ids)

    def fired(self) -> int:
        return sum(self.injected().values())

    def injected(self) -> dict[str, int]:
        """Faults injected so far, by kind (calls, or batch entries for partial failures)."""
        return {name: self._count(fault) for name, fault in self.faults.items()}

    @staticmethod
    def _count(fault: FailCalls | FailBatchEntries) -> int:
        return fault.failed_calls if isinstance(fault, FailCalls) else fault.failed_entries

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
        SCRIPTED.clear()
        self.sent.clear()
        self.received.clear()

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
        self.virtual_roots: list[tuple[str, float]] = []  # (rootJobSignature, timestamp)
        self.lost: set[str] = set()  # jobs with a delivery lost to a crash, a drop or a fault
        self.crashed: set[str] = set()  # jobs whose own script killed an invocation
        self.copied: set[str] = set()

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
            self.group.push(specs)

    @rule(script=SCRIPTS, delay=DELAYS, count=st.integers(1, 3))
    def push_plain(self, script: dict[str, Any], delay: int | None, count: int) -> None:
        self._push([JobSpecification("plain", {"script": script, "n": n}, delay=delay) for n in range(count)])

    @rule(key=st.sampled_from(["a", "b"]), scripts=st.lists(SCRIPTS, min_size=1, max_size=3), gap=st.booleans())
    def push_twins(self, key: str, scripts: list[dict[str, Any]], gap: bool) -> None:
        for n, script in enumerate(scripts):
            self._push([JobSpecification("twin", {"key": key, "script": script, "n": n})])
            if gap:
                self.clock.advance(1)

    @rule(script=SCRIPTS, delay=DELAYS)
    def push_once(self, script: dict[str, Any], delay: int | None) -> None:
        self._push([JobSpecification("once", {"script": script}, delay=delay)])

    @rule(key=st.sampled_from(["r1", "r2"]), leaves=st.integers(0, 3), script=SCRIPTS, leaf_script=SCRIPTS)
    def push_root(self, key: str, leaves: int, script: dict[str, Any], leaf_script: dict[str, Any]) -> None:
        self.clock.advance(1)  # a newer root than any before it
        params = {"script": {**script, "leaves": leaves}, "leafScript": leaf_script}
        self._push([JobSpecification("leaf", {**params, **new_root_job_params(key, self.clock.now())})])

    @rule(key=st.sampled_from(["r1", "r2"]), count=st.integers(1, 3), age=st.sampled_from([0, 5, 30]))
    def push_leaves(self, key: str, count: int, age: int) -> None:
        root = {k: v for k, v in new_root_job_params(key, self.clock.now() - age).items() if k != "rootJobIsSelf"}
        self._push([JobSpecification("leaf", {"n": n, **root}) for n in range(count)])

    @rule(key=st.sampled_from(["r1", "r2"]))
    def record_virtual_root(self, key: str) -> None:
        self.clock.advance(1)
        params = new_root_job_params(key, self.clock.now())
        try:
            self.group.deduplicate_root_job(JobSpecification("leaf", params))
        except JobKitError:
            return  # the store was down: nothing was recorded
        self.virtual_roots.append((params["rootJobSignature"], params["rootJobTimestamp"]))

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
        self.crashed.add(crash.job_id)
        self.lost |= set(self.h.last_batch) - {crash.job_id}

    def _receive(self, queue: str) -> list[dict[str, Any]]:
        try:
            response = self.h.stack.sqs.receive_message(
                QueueUrl=self.h.queue_url(queue),
                MaxNumberOfMessages=DECLARATION.queues[queue].batch_size,
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
                self.copied.update(job_id_of(m["Body"]) or "" for m in messages)
                self.h.stack.mappings[queue].deliver(messages)
                self.h.stack.mappings[queue].deliver(messages)

        self._act(twice)

    @rule(queue=st.sampled_from(QUEUES))
    def crash_before_reporting(self, queue: str) -> None:
        # The invocation received a batch and died before it reported anything:
        # the messages reappear after their visibility timeout, one receive spent.
        self.lost.update(job_id_of(m["Body"]) or "" for m in self._receive(queue))

    @precondition(lambda self: bool(self.h.sent.specs))
    @rule(data=st.data())
    def send_a_copy(self, data: st.DataObject) -> None:
        # SQS's at-least-once delivery, as a second message with the same body.
        job_id = data.draw(st.sampled_from(list(self.h.sent.specs)))  # in push order: replayable
        spec = self.h.sent.specs[job_id]
        try:
            self.h.stack.sqs.send_message(
                QueueUrl=self.h.queue_url(DECLARATION.types[spec.type].queue),
                MessageBody=self.h.sent.bodies[job_id],
                MessageAttributes={TYPE_ATTRIBUTE: string_attribute(spec.type)},
            )
        except ClientError:  # an injected fault: no copy
            return
        self.copied.add(job_id)

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

    # -- the end ----------------------------------------------------------------------------

    def teardown(self) -> None:
        # The next example's reset empties the queues, whatever happened here.
        self._drain_everything()  # faults still armed run out on the way
        self.h.disarm()
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
        self.clock.advance(0.01)  # moto shows a message again only once the clock has passed its visible_at
        dead = [m for queue in QUEUES for m in self.h.stack.dead_letters(queue)]
        evidence = fates(sent, self.h.stack.results.results, SCRIPTED, dead)
        assert set(evidence) == set(sent), f"evidence about jobs nobody pushed: {set(evidence) - set(sent)}"
        disturbed = self.lost | self.crashed
        for job_id, spec in sent.items():
            fate = evidence[job_id]
            assert fate.category is not Category.LOST, f"lost: {spec.type} {fate.describe()}"
            if fate.dead_and_done:
                # Two deliveries, each ending its own way (one dead-lettered, one
                # run or de-duplicated later): only if the model made a second one.
                assert job_id in disturbed | self.copied, f"dead-lettered although done: {fate.describe()}"
            for message in fate.dead_letters:
                self._check_dead_letter(message, fate, disturbed)
            if job_id not in self.lost:
                self._check_script(spec, fate)
        self._check_duplicates(evidence)
        self._check_supersessions()
        self._check_redeliveries(evidence)
        self._check_release_times()

    def _check_dead_letter(self, message: dict[str, Any], fate: Fate, disturbed: set[str]) -> None:
        attributes = reason(message)
        if attributes:
            assert attributes["jobkit.reason"] in {"non_retryable", "attempts_exhausted"}, attributes
            assert attributes["jobkit.errorClass"] and attributes["jobkit.error"], attributes
            return
        # Moved by SQS's redrive policy: only where the runner could not act.
        spec = self.h.sent.specs[fate.job_id]
        has_records = self.h.stack.dedup_store().runs(JobRef(spec.type, spec.domain, spec.id)) != JobRuns()
        assert has_records or fate.job_id in disturbed, f"redriven without a trace: {fate.describe()}"

    def _check_script(self, spec: JobSpecification, fate: Fate) -> None:
        """An undisturbed job ends as its script says (unless de-duplicated)."""
        if fate.category in (Category.DUPLICATE, Category.SUPERSEDED):
            return
        script = spec.params.get("script") or {}
        limit = DECLARATION.types[spec.type].max_attempts
        can_succeed = not script.get("permanent") and any(
            attempt > int(script.get("fail", 0)) and attempt not in script.get("crash", ())
            for attempt in range(1, limit + 1)
        )
        if can_succeed:
            assert fate.category is Category.SUCCEEDED, f"should have succeeded: {spec.params} {fate.describe()}"
            return
        assert fate.category is Category.DEAD_LETTERED, f"should be dead-lettered: {spec.params} {fate.describe()}"
        if spec.id not in self.crashed:
            expected = "non_retryable" if script.get("permanent") else "attempts_exhausted"
            assert {reason(m).get("jobkit.reason") for m in fate.dead_letters} == {expected}, fate.describe()

    def _check_duplicates(self, evidence: dict[str, Fate]) -> None:
        sent = self.h.sent.specs
        successes = [
            (sent[run.job_id].dedup_hash(TWIN_IGNORED), run.started_at)
            for fate in evidence.values()
            for run in fate.runs
            if run.outcome == "succeeded" and run.job_type == "twin"
        ]
        for result in self.h.stack.results.results:
            if result.outcome is Outcome.DUPLICATE:
                spec = sent[result.job_id or ""]
                enqueued = spec.enqueued_at or 0.0
                key = spec.dedup_hash(TWIN_IGNORED)
                assert any(k == key and started > enqueued for k, started in successes), (
                    f"dropped as a duplicate with no twin that started after {enqueued} and succeeded: "
                    f"{evidence[spec.id].describe()}"
                )

    def _check_supersessions(self) -> None:
        sent = self.h.sent.specs
        roots = [(s.domain, s.root_job_signature, s.root_job_timestamp) for s in sent.values()]
        roots += [(self.domain, signature, timestamp) for signature, timestamp in self.virtual_roots]
        for result in self.h.stack.results.results:
            if result.outcome is Outcome.SUPERSEDED:
                spec = sent[result.job_id or ""]
                assert any(
                    (domain, signature) == (spec.domain, spec.root_job_signature)
                    and (timestamp or 0) > (spec.root_job_timestamp or 0)
                    for domain, signature, timestamp in roots
                ), f"superseded with no newer root: {spec.params}"

    def _check_redeliveries(self, evidence: dict[str, Fate]) -> None:
        for result in self.h.stack.results.results:
            if result.outcome is Outcome.REDELIVERED:
                fate = evidence[result.job_id or ""]
                assert result.job_type == "once" and fate.succeeded, f"redelivered before it ran: {fate.describe()}"

    def _check_release_times(self) -> None:
        sent = self.h.sent.specs
        for run in SCRIPTED:
            release = sent[run.job_id].release_at
            assert release is None or run.started_at >= release, f"ran before its release: {run}"
        for result in self.h.stack.results.results:
            release = sent[result.job_id].release_at if result.job_id in sent else None
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
        f"in {elapsed:.1f} s; faults injected: {harness.injected()}"
    )
    assert harness.examples >= EXAMPLES
