"""Soak: tens of thousands of jobs through the local stack, in bad weather.

Pushes ``--jobs`` jobs (plus the leaves their roots fan out into) through the
real runner on the embedded AWS (moto, frozen virtual clock) while every SQS
and DynamoDB call fails with probability ``--fault-rate`` (throttles and 5xx,
on the push SDK's, the runner's and Lambda's poller's calls alike), and some
jobs fail on purpose (transiently, for good, or until their attempts run out).
It runs a polling round after every push of 20 jobs, so producers and
runners overlap as they do on AWS, then drains everything, past every
backoff and delay, and collects the DLQs.

Then it balances the books. "Pushed" is counted at the API: the distinct job
IDs in SendMessageBatch entries that SQS accepted (not push()'s return value),
cross-checked against jobkit.local.results.EnqueueCounter. Each pushed job is
counted once, in the first category that applies: succeeded (an attempt ran
to success, as the job itself recorded), duplicate (acknowledged as a
duplicate of a successful run, or as a deliver-once redelivery), superseded,
dead-lettered (in a DLQ), else lost. It exits non-zero unless

    pushed = succeeded + duplicate + superseded + dead-lettered, and lost = 0,

every dead letter carries its reason (jobkit.* attributes) or, when SQS's
redrive policy moved it, failure records, and every queue is empty.

    python benchmarks/soak.py --jobs 50000 --fault-rate 0.05 [--seed 1] [--json results.json]

It prints the books and its wall time. ``run()`` returns them (a
:class:`SoakResult`: ``seconds``, ``balanced``, the counts); ``as_dict()``
turns that into what ``--json`` writes, with ``wall_s``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "fixtures")]

DECLARATION_PATH = ROOT / "tests" / "fixtures" / "soak.toml"
START = 1_800_000_000.0
CHUNK = 20  # jobs per push() call; a polling round follows each


@dataclass
class SoakResult:
    jobs: int
    fault_rate: float
    seed: int
    pushed: int = 0
    succeeded: int = 0
    duplicate: int = 0
    superseded: int = 0
    dead_lettered: int = 0
    lost: int = 0
    refused_at_push: int = 0  # jobs push() reported as not enqueued (never counted as pushed)
    accepted_entries: int = 0  # EnqueueCounter's count of accepted SendMessageBatch entries
    dead_letter_copies: int = 0
    dead_letters_redriven: int = 0  # moved by SQS's redrive policy (no jobkit.reason)
    dead_letters_unexplained: int = 0  # no reason, no failure record, job never finished: must be 0
    dead_and_done: int = 0  # a redundant DLQ copy of a job that also finished (at-least-once)
    attempts: int = 0
    queues_empty: bool = False
    faults_injected: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def balanced(self) -> bool:
        settled = self.succeeded + self.duplicate + self.superseded + self.dead_lettered
        return (
            self.pushed == settled
            and self.lost == 0
            and self.dead_letters_unexplained == 0
            and self.queues_empty
            and self.accepted_entries >= self.pushed
        )


def _script(rng: random.Random, failure_rate: float) -> dict[str, Any]:
    roll = rng.random()
    if roll < failure_rate / 2:
        return {"fail": 1}  # transient: fails once, then succeeds
    if roll < failure_rate * 3 / 4:
        return {"fail": 5}  # fails until its attempts run out
    if roll < failure_rate:
        return {"permanent": True}  # NonRetryableError: straight to the DLQ
    return {}


def _workload(rng: random.Random, jobs: int, failure_rate: float, clock: Any) -> Any:
    """Yields chunks of specs: plain jobs, twins, deliver-once jobs, roots that
    fan out, leaves of older roots, and a few delayed jobs."""
    from jobkit import JobSpecification
    from jobkit.core.spec import new_root_job_params

    made = 0
    n = 0
    while made < jobs:
        chunk = []
        for _ in range(min(CHUNK, jobs - made)):
            n += 1
            domain = f"wiki{rng.randrange(4)}"
            script = _script(rng, failure_rate)
            kind = rng.random()
            delay = rng.choice([5, 1000]) if rng.random() < 0.01 else None
            if kind < 0.55:
                spec = JobSpecification("plain", {"script": script, "n": n}, domain=domain, delay=delay)
            elif kind < 0.77:  # twins: the same key, pushed close together, collapse
                key = f"page{rng.randrange(max(1, n // 50))}"
                spec = JobSpecification("twin", {"key": key, "script": script, "n": n}, domain=domain, delay=delay)
            elif kind < 0.87:
                spec = JobSpecification("once", {"script": script}, domain=domain, delay=delay)
            elif kind < 0.90:  # a root job: it fans out into leaves of its own
                root = new_root_job_params(f"template{rng.randrange(20)}", clock.now())
                params = {"script": {**script, "leaves": rng.randrange(1, 6)}, "leafScript": {}, **root}
                spec = JobSpecification("leaf", params, domain=domain)
            else:  # a leaf of a root that may since have been replaced
                root = new_root_job_params(f"template{rng.randrange(20)}", clock.now() - rng.choice([0, 30, 300]))
                root.pop("rootJobIsSelf")
                spec = JobSpecification("leaf", {"n": n, "script": script, **root}, domain=domain)
            chunk.append(spec)
        made += len(chunk)
        yield chunk


def run(
    jobs: int,
    fault_rate: float,
    *,
    seed: int = 1,
    failure_rate: float = 0.04,
    progress: bool = False,
) -> SoakResult:
    from ledger import Category, SentJobs, fates, reason

    from jobkit.core.clock import VirtualClock
    from jobkit.core.errors import JobQueueError
    from jobkit.declaration.config import load_declaration
    from jobkit.local import LocalStack
    from jobkit.local.moto_patches import has_receivable
    from jobkit.local.results import EnqueueCounter
    from jobkit.local.stack import ACCOUNT_ID
    from jobkit.records import JobRuns
    from jobkit.records.keys import JobRef

    import testjobs
    from faults import FaultSet

    began = time.perf_counter()
    result = SoakResult(jobs=jobs, fault_rate=fault_rate, seed=seed)
    rng = random.Random(seed)
    declaration = load_declaration(DECLARATION_PATH)
    queues = sorted(declaration.queues)
    clock = VirtualClock(START)
    testjobs.use_clock(clock)
    testjobs.SCRIPTED.clear()
    dead: list[dict[str, Any]] = []

    with LocalStack(declaration, clock=clock, seed=seed) as stack:
        sent = SentJobs(stack.sqs)
        counter = EnqueueCounter(stack.sqs)
        weather = FaultSet(stack.sqs, stack.dynamodb, rate=fault_rate, seed=seed)
        names = [declaration.queue_name(q) for q in queues]

        def empty() -> bool:
            now = clock.now()
            receivable = any(has_receivable(ACCOUNT_ID, stack.region, name, now) for name in names)
            return not receivable and stack.next_wakeup() is None

        def collect_dead_letters() -> None:
            for queue in queues:
                url = stack.queue_urls[declaration.dlq_name(queue)]
                while True:
                    try:
                        messages = stack.sqs.receive_message(
                            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
                        ).get("Messages", [])
                        if not messages:
                            break
                        stack.sqs.delete_message_batch(
                            QueueUrl=url,
                            Entries=[
                                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
                            ],
                        )
                    except Exception:  # weather: try again next time; nothing was taken
                        break
                    dead.extend(messages)

        group = stack.queue_group()
        for number, chunk in enumerate(_workload(rng, jobs, failure_rate, clock)):
            try:
                group.push(chunk)
            except JobQueueError as exc:
                result.refused_at_push += len(exc.failed)
            stack.poll_once()
            clock.advance(0.05)
            if progress and number % 50 == 0:
                done = min(jobs, (number + 1) * CHUNK)
                print(f"\r  pushed {done:,} / {jobs:,} in {time.perf_counter() - began:.0f} s", end="", flush=True)
        for _ in range(1000):  # drain to the end, faults and all
            stack.drain()
            collect_dead_letters()
            if empty():
                break
            clock.advance(61)  # a receive failed: drain stopped with messages left
        weather.stop()
        result.queues_empty = empty() and all(stack.queue_depth(q) == 0 for q in queues)
        clock.advance(61)
        collect_dead_letters()
        if progress:
            print()

        evidence = fates(sent.specs, stack.results.results, testjobs.SCRIPTED, dead)
        tally = Counter(fate.category for job_id, fate in evidence.items() if job_id in sent.specs)
        result.pushed = len(sent.specs)
        result.succeeded = tally[Category.SUCCEEDED]
        result.duplicate = tally[Category.DUPLICATE]
        result.superseded = tally[Category.SUPERSEDED]
        result.dead_lettered = tally[Category.DEAD_LETTERED]
        result.lost = tally[Category.LOST] + sum(1 for job_id in evidence if job_id not in sent.specs)
        result.accepted_entries = sum(counter.by_type.values())
        result.dead_letter_copies = len(dead)
        result.dead_and_done = sum(1 for fate in evidence.values() if fate.dead_and_done)
        journal = stack.journal()
        for fate in evidence.values():
            for message in fate.dead_letters:
                if not reason(message):
                    result.dead_letters_redriven += 1
                    # Moved by SQS's redrive policy: the runner could not act (a crash, a
                    # failed DLQ copy) and its failure records say why; or the job had
                    # finished and only its deletes were lost (a redundant copy).
                    spec = sent.specs[fate.job_id]
                    ref = JobRef(spec.type, spec.domain, spec.id)
                    if not fate.dead_and_done and journal.runs(ref) == JobRuns():
                        result.dead_letters_unexplained += 1
        result.attempts = len(testjobs.SCRIPTED)
        result.faults_injected = weather.counts
        result.outcomes = dict(sorted(Counter(str(r.outcome) for r in stack.results.results).items()))
    result.seconds = round(time.perf_counter() - began, 1)
    return result


def as_dict(result: SoakResult) -> dict[str, Any]:
    """A soak's figures: every field of :class:`SoakResult`, ``balanced``, and ``wall_s``."""
    return {**asdict(result), "balanced": result.balanced, "wall_s": result.seconds}


def report(result: SoakResult) -> str:
    faults = result.faults_injected
    lines = [
        f"soak: {result.jobs:,} jobs pushed by the app (plus their fan-out), fault rate {result.fault_rate:.0%}, "
        f"seed {result.seed}, {result.seconds:,.1f} s",
        f"  pushed (SQS accepted, distinct IDs) {result.pushed:>9,}",
        f"  succeeded                           {result.succeeded:>9,}",
        f"  duplicate                           {result.duplicate:>9,}",
        f"  superseded                          {result.superseded:>9,}",
        f"  dead-lettered                       {result.dead_lettered:>9,}",
        f"  lost                                {result.lost:>9,}",
        f"  refused at push (named by push())   {result.refused_at_push:>9,}",
        f"  attempts run                        {result.attempts:>9,}",
        f"  DLQ messages                        {result.dead_letter_copies:>9,}"
        f" ({result.dead_letters_redriven:,} moved by the redrive policy, {result.dead_letters_unexplained} of them"
        f" unexplained; {result.dead_and_done:,} redundant copies of jobs that also finished, after lost deletes)",
        f"  faults injected                     {sum(faults.values()):>9,} "
        + ", ".join(f"{name} {count:,}" for name, count in faults.items()),
        f"  runner outcomes                     {result.outcomes}",
    ]
    settled = result.succeeded + result.duplicate + result.superseded + result.dead_lettered
    verdict = "balances" if result.balanced else "DOES NOT BALANCE"
    lines.append(
        f"pushed {result.pushed:,} = succeeded + duplicate + superseded + dead-lettered {settled:,}; "
        f"lost {result.lost}; queues empty: {result.queues_empty}: {verdict}"
    )
    minutes, seconds = divmod(result.seconds, 60)
    lines.append(f"wall time {result.seconds:,.1f} s ({minutes:.0f} min {seconds:.0f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument(
        "--fault-rate", type=float, default=0.05, help="probability that any SQS or DynamoDB call fails"
    )
    parser.add_argument("--job-failure-rate", type=float, default=0.04, help="share of jobs scripted to fail")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # a 5% fault rate logs a warning every few jobs
    result = run(args.jobs, args.fault_rate, seed=args.seed, failure_rate=args.job_failure_rate, progress=True)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(as_dict(result), indent=2) + "\n")
    return 0 if result.balanced else 1


if __name__ == "__main__":
    sys.exit(main())
