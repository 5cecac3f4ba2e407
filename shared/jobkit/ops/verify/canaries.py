"""The canaries of ``jobkit verify``: sent through each queue, judged by
what they recorded in the jobs table, and cleaned up after (see
:mod:`jobkit.ops.verify`)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from jobkit.core.resources import CANARY_TYPE, RUNNER_RECURSIVE_LOOP
from jobkit.core.spec import JobSpecification
from jobkit.declaration.config import Declaration, QueueConfig
from jobkit.jobs.canary import EXPIRES_PARAM
from jobkit.ops.verify.check import Check, Clients, VerifyRefused, call
from jobkit.ops.verify.dead_letters import CanaryDeadLetters
from jobkit.ops.verify.wiring import WiringChecks
from jobkit.records import JobState, JobStatus
from jobkit.sqs import TYPE_ATTRIBUTE, string_attribute

#: The domain canaries are sent in (their records are keyed by it, like any job's).
CANARY_DOMAIN = "jobkit-verify"
#: The hops of the chain check (Lambda stops a chain at its 16th round unless told).
CHAIN_HOPS = 20
#: The hop of the delay check, and how many of them.
DELAY_HOP_S, DELAY_HOPS = 3, 3
#: How long a canary lives: one delivered after this is dropped unrun.
CANARY_LIFETIME_S = 15 * 60
#: The canary checks, in the order they are reported for each queue.
CANARY_CHECKS = ("runs", "delay", "chain", "dead letter")
#: How far this machine's clock may be from AWS's: canaries carry its time.
MAX_CLOCK_SKEW_S = 60


@dataclass
class _Canary:
    check: str
    spec: JobSpecification
    delay_s: int = 0

    @property
    def id(self) -> str:
        return self.spec.id


class Verify:
    """Runs the checks of one stack (:func:`verify`)."""

    def __init__(
        self,
        declaration: Declaration,
        clients: Clients,
        queue_urls: Mapping[str, str],
        *,
        now: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        timeout_s: float = 120.0,
        dead_letter: bool = True,
        on_check: Callable[[Check], None] | None = None,
    ) -> None:
        self._declaration = declaration
        self._clients = clients
        self._urls = queue_urls
        self._now, self._sleep = now, sleep
        self._timeout_s = timeout_s
        #: The canary checks to run (without "dead letter", no canary goes near a DLQ).
        self._checks = tuple(c for c in CANARY_CHECKS if dead_letter or c != "dead letter")
        self._on_check = on_check or (lambda _: None)
        self._run = uuid.uuid4().hex[:10]
        self._dead_taken: set[str] = set()  # the queues whose dead-lettered canary was found and deleted
        self._dead = CanaryDeadLetters(clients.sqs, lambda queue: self._url(queue, dlq=True), self._run)
        #: The canaries that may still run, or reach a DLQ, after verify ends (set by :meth:`run`).
        self.left_behind: list[str] = []
        self._wiring = WiringChecks(declaration, clients, self._url)
        self.checks: list[Check] = []

    # -- the whole run -------------------------------------------------------------------------

    def run(self, queues: Sequence[QueueConfig]) -> list[Check]:
        sent: dict[str, list[_Canary]] = {}
        try:
            if queues:
                self._preflight(queues[0])
            for queue in queues:
                self._send(queue, sent)
            self._await_and_judge(queues, sent)
            for queue in queues:
                for check in self._wiring.checks(queue):
                    self._add(check)
        finally:
            self._clean(sent)
        return self.checks

    def _preflight(self, queue: QueueConfig) -> None:
        """Before any canary is sent: the jobs table can be read (or verify says
        why, naming it), and this machine's clock agrees with AWS's, whose
        runners judge a canary by the times it carries."""
        table = f"table {self._declaration.table_name}"
        call("dynamodb:Query", lambda: self._clients.records.statuses(CANARY_TYPE, f"canary-{self._run}"), table)
        url = self._url(queue.name)
        response = call(
            "sqs:GetQueueAttributes",
            lambda: self._clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"]),
        )
        date = (response.get("ResponseMetadata") or {}).get("HTTPHeaders", {}).get("date")
        with contextlib.suppress(TypeError, ValueError):
            skew = self._now() - parsedate_to_datetime(date).timestamp()
            if abs(skew) > MAX_CLOCK_SKEW_S:
                raise VerifyRefused(
                    f"this machine's clock is {abs(skew):.0f} s {'ahead of' if skew > 0 else 'behind'} AWS's (the"
                    " Date of SQS's answer): the runners would refuse its canaries as from the future or drop them"
                    " as expired; set the clock (NTP) and run again"
                )

    def _add(self, check: Check) -> None:
        self.checks.append(check)
        self._on_check(check)

    # -- canaries ------------------------------------------------------------------------------

    def _canaries(self, queue: QueueConfig) -> list[_Canary]:
        now = self._now()

        def spec(check: str, job_id: str, release_at: float | None = None, **params: Any) -> JobSpecification:
            body = {"verify": self._run, "check": check, EXPIRES_PARAM: now + CANARY_LIFETIME_S, **params}
            return JobSpecification(
                CANARY_TYPE,
                body,
                domain=CANARY_DOMAIN,
                id=f"canary-{self._run}-{job_id}-{queue.name}"[:80],
                release_at=release_at,
                remove_duplicates=check == "runs",
            )

        canaries = [
            # two identical twins (the same params): one runs, the other is its duplicate
            _Canary("runs", spec("runs", "runs-a")),
            _Canary("runs", spec("runs", "runs-b")),
            _Canary(
                "delay", spec("delay", "delay", now + DELAY_HOP_S * (DELAY_HOPS + 0.5), hopS=DELAY_HOP_S), DELAY_HOP_S
            ),
            _Canary("chain", spec("chain", "chain", now + CHAIN_HOPS + 0.5, hopS=1), 1),
            _Canary("dead letter", spec("dead letter", "dlq", fail=True)),
        ]
        return [c for c in canaries if c.check in self._checks]

    def _send(self, queue: QueueConfig, sent: dict[str, list[_Canary]]) -> None:
        """Send the queue's canaries in one batch; those SQS took go into ``sent``
        (to be cleaned up) even when it refused others."""
        url = self._url(queue.name)
        canaries = self._canaries(queue)
        now = self._now()
        entries = [
            {
                "Id": str(n),
                "MessageBody": canary.spec.stamped(now).to_message(),
                "MessageAttributes": {TYPE_ATTRIBUTE: string_attribute(CANARY_TYPE)},
                "DelaySeconds": canary.delay_s,
            }
            for n, canary in enumerate(canaries)
        ]
        response = call("sqs:SendMessage", lambda: self._clients.sqs.send_message_batch(QueueUrl=url, Entries=entries))
        taken = {entry.get("Id") for entry in response.get("Successful") or []}
        sent[queue.name] = [canary for n, canary in enumerate(canaries) if str(n) in taken]
        failed = response.get("Failed") or []
        if failed:
            raise VerifyRefused(f"SQS refused the canaries for queue {queue.name}: {failed[0].get('Message')}")

    def _await_and_judge(self, queues: Sequence[QueueConfig], sent: Mapping[str, list[_Canary]]) -> None:
        """Poll the jobs table (and the DLQs) once a second until every canary's
        fate is known or the timeout; at the timeout, what is unknown fails."""
        deadline = self._now() + self._timeout_s
        waiting = [(queue, check) for queue in queues for check in self._checks]
        while waiting:
            final = self._now() >= deadline
            still = []
            for queue, check in waiting:
                verdict = self._judge(queue, check, sent[queue.name], final=final)
                if verdict:
                    for line in verdict:
                        self._add(line)
                else:
                    still.append((queue, check))
            waiting = still
            if waiting:
                self._sleep(1.0)

    def _judge(self, queue: QueueConfig, check: str, canaries: list[_Canary], *, final: bool) -> list[Check]:
        mine = [c for c in canaries if c.check == check]
        if check == "runs":
            return self._judge_runs(queue, mine, final)
        if check == "dead letter":
            return self._judge_dead_letter(queue, mine[0], final)
        return self._judge_released(queue, check, mine[0], final)

    def _status(self, canary: _Canary) -> JobStatus | None:
        statuses = call("dynamodb:GetItem", lambda: self._clients.records.statuses(CANARY_TYPE, canary.id))
        return next((s for s in statuses if s.domain == CANARY_DOMAIN), None)

    def _judge_runs(self, queue: QueueConfig, twins: list[_Canary], final: bool) -> list[Check]:
        statuses = [self._status(c) for c in twins]
        ran = [s for s in statuses if s is not None and s.state is JobState.SUCCEEDED]
        skipped = [s for s in statuses if s is not None and s.state is JobState.SKIPPED]
        if len(ran) == 1 and len(skipped) == 1:
            return [
                Check("runs", queue.name, True, "a canary ran", {"attempt": ran[0].attempt}),
                Check("duplicate", queue.name, True, f"its twin was skipped: {skipped[0].note}"),
            ]
        if len(ran) == 2:
            return [
                Check("runs", queue.name, True, "a canary ran", {}),
                Check("duplicate", queue.name, False, "both twins ran: duplicates are not removed (the jobs table?)"),
            ]
        if not final:
            return []
        seen = "; ".join(
            f"{c.id}: {s.state.value if s else self._where(queue, c)}" for c, s in zip(twins, statuses, strict=True)
        )
        runs = "a canary ran" if ran else f"no canary ran within {self._timeout_s:.0f} s ({seen}){NOT_RUN}"
        return [
            Check("runs", queue.name, bool(ran), runs),
            Check("duplicate", queue.name, False, f"no twin was skipped as a duplicate ({seen})"),
        ]

    def _judge_released(self, queue: QueueConfig, check: str, canary: _Canary, final: bool) -> list[Check]:
        release = canary.spec.release_at or 0.0
        if not final and self._now() < release:
            return []  # nothing to read before its release (a read a second is verify's main cost)
        status = self._status(canary)
        if status is not None and status.state is JobState.SUCCEEDED:
            started = status.started_at or status.updated_at
            late = started - release
            hops = "3 hops of 3 s" if check == "delay" else f"{CHAIN_HOPS} hops of 1 s"
            if late < -1.0:  # a second for the clocks of two machines
                return [Check(check, queue.name, False, f"it ran {-late:.1f} s before its release", {"late_s": late})]
            detail = f"picked up {late:.1f} s after its release ({hops})"
            return [Check(check, queue.name, True, detail, {"late_s": round(late, 3)})]
        if not final:
            return []
        where = self._where(queue, canary)
        detail = f"not run within {self._timeout_s:.0f} s: {where}"
        if check == "chain" and self._recursion(queue) != RUNNER_RECURSIVE_LOOP:
            detail += (
                f". Lambda's recursive loop detection stops a chain of sends at its 16th round unless the runner has"
                f" RecursiveLoop: {RUNNER_RECURSIVE_LOOP} (jobkit template sets it): deploy the current template."
                f" The stopped canary reaches {self._declaration.dlq_name(queue.name)} after its receives:"
                f" delete it with `jobkit dlq delete {queue.name} {canary.id}`"
            )
        elif check == "chain":
            detail += f" (the chain needs about {CHAIN_HOPS + 1} s: run again with a longer --timeout?)"
        else:
            detail += NOT_RUN
        return [Check(check, queue.name, False, detail)]

    def _recursion(self, queue: QueueConfig) -> str | None:
        """The runner's RecursiveLoop setting (``None`` when it cannot be read)."""
        with contextlib.suppress(Exception):
            function = self._declaration.names.runner(queue.name)
            found = self._clients.lambda_.get_function_recursion_config(FunctionName=function)
            return str(found.get("RecursiveLoop"))
        return None

    def _judge_dead_letter(self, queue: QueueConfig, canary: _Canary, final: bool) -> list[Check]:
        reason = self._failure_reason(canary)  # the runner writes it before the DLQ copy
        if reason is not None and self._take_dead_letter(queue, canary):
            ok = reason == "non_retryable"
            detail = f"in the DLQ with its reason, {reason}" + ("" if ok else " (expected non_retryable)")
            earlier = sorted(self._dead.earlier.get(queue.name, ()))
            if earlier:
                detail += (
                    f"; {len(earlier)} canary(ies) of earlier runs are in the DLQ too (runs that were stopped):"
                    f" delete each with `jobkit dlq delete {queue.name} ID`, e.g. {earlier[0]}"
                )
            return [Check("dead letter", queue.name, ok, detail + "; removed", {"reason": reason})]
        if not final:
            return []
        if reason is not None:
            detail = f"dead-lettered ({reason}), but its message was not found in {queue.name}'s DLQ"
        else:
            detail = f"not dead-lettered within {self._timeout_s:.0f} s: {self._where(queue, canary)}{NOT_RUN}"
        return [Check("dead letter", queue.name, False, detail)]

    def _failure_reason(self, canary: _Canary) -> str | None:
        runs = call("dynamodb:Query", lambda: self._clients.records.runs(CANARY_TYPE, canary.id, 5, CANARY_DOMAIN))
        found = runs.get(CANARY_DOMAIN)
        for failure in found.failures if found is not None else ():
            if failure.dead_letter_reason:
                return str(failure.dead_letter_reason)
        return None

    def _take_dead_letter(self, queue: QueueConfig, canary: _Canary) -> bool:
        """Find the canary's message in the queue's DLQ and delete it."""
        if queue.name not in self._dead_taken and self._take_dead_letters(queue.name, {canary.id}):
            self._dead_taken.add(queue.name)
        return queue.name in self._dead_taken

    def _take_dead_letters(self, queue: str, job_ids: set[str]) -> int:
        """Delete the messages of these canaries from the queue's DLQ; the DLQ's
        other messages are read without being consumed."""
        return self._dead.take(queue, job_ids)

    def _where(self, queue: QueueConfig, canary: _Canary) -> str:
        """What was last seen of a canary: the queue's depth and its DLQ's."""
        try:
            attributes = self._clients.sqs.get_queue_attributes(
                QueueUrl=self._url(queue.name),
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )["Attributes"]
        except Exception:
            return "no status record, and the queue could not be read"
        dead = {}
        with contextlib.suppress(Exception):
            dead = self._dead.reasons(queue.name, {canary.id})
        if canary.id in dead:  # the runner's reason (a clock it refused, say), before the clean-up deletes it
            return f"no status record; it is in {self._declaration.dlq_name(queue.name)}: {dead[canary.id]}"
        return (
            f"no status record; queue {queue.name} holds {attributes.get('ApproximateNumberOfMessages')} visible,"
            f" {attributes.get('ApproximateNumberOfMessagesNotVisible')} in flight,"
            f" {attributes.get('ApproximateNumberOfMessagesDelayed')} delayed"
        )

    # -- wiring --------------------------------------------------------------------------------

    # -- cleaning up -----------------------------------------------------------------------------

    def _clean(self, sent: Mapping[str, list[_Canary]]) -> None:
        """Delete what the canaries left: their records, and any of them in a DLQ
        (the failing one; one that a misconfigured stack dead-lettered)."""
        passed = {(c.queue, c.name) for c in self.checks if c.ok}
        failed = {c.queue for c in self.checks if not c.ok and c.name in (*CANARY_CHECKS, "duplicate")}
        for queue_name, canaries in sent.items():
            untaken = "dead letter" in self._checks and queue_name not in self._dead_taken
            if untaken or queue_name in failed:
                with contextlib.suppress(Exception):  # what cannot be deleted now expires unrun
                    self._take_dead_letters(queue_name, {c.id for c in canaries})
            for canary in canaries:
                self._delete_records(canary)
                if (queue_name, canary.check) not in passed:
                    self.left_behind.append(self._left(queue_name, canary))

    def _left(self, queue: str, canary: _Canary) -> str:
        """What a canary whose fate verify did not see may still do."""
        if canary.check == "dead letter":
            return (
                f"{canary.id}: may still reach {self._declaration.dlq_name(queue)}:"
                f" delete it with `jobkit dlq delete {queue} {canary.id}`"
            )
        dlq = self._declaration.dlq_name(queue)
        return (
            f"{canary.id} ({canary.check}): may still run before it expires (15 min after it was sent), leaving a"
            f" status record that expires in 14 days; stopped by Lambda, it reaches {dlq}:"
            f" delete it there with `jobkit dlq delete {queue} {canary.id}`"
        )

    def _delete_records(self, canary: _Canary) -> None:
        """The canary's status and failure records, and its duplicate claim."""
        dedup_hash = canary.spec.dedup_hash() if canary.check == "runs" else None
        with contextlib.suppress(Exception):  # records expire by themselves (TTL)
            self._clients.records.delete_job_records(CANARY_TYPE, canary.id, dedup_hash=dedup_hash)

    # -- plumbing ------------------------------------------------------------------------------

    def _url(self, queue: str, *, dlq: bool = False) -> str:
        name = self._declaration.dlq_name(queue) if dlq else self._declaration.queue_name(queue)
        url = self._urls.get(name)
        if url is None:
            raise VerifyRefused(f"queue {name} was not found: is the stack deployed under this prefix and region?")
        return url


#: What a canary that did not run asks the operator to look at.
NOT_RUN = (
    ". Is the runner's event source mapping enabled, and may its role read the queue and write the jobs table?"
    " Its log group says why a batch failed (docs/runbook.md, 'After a deploy')"
)
