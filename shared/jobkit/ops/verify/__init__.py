"""``jobkit verify``: a deployed stack proves itself.

Through each declared queue (or each named type's), it sends canaries
(:mod:`jobkit.jobs.canary`, a type every runner serves without a declaration and
which runs no user code) and reads back what became of each from the jobs
table, where a canary records its status:

- **runs**: two identical canaries, sent together and asking for duplicate
  removal: one runs;
- **duplicate**: the other is skipped as its duplicate, for its stated reason;
- **delay**: a canary released three hops later is picked up after its
  release. Its hops are a few seconds each (a canary may ask for a shorter
  ``DelaySeconds``): the same path as a 900 s hop, the re-send the runner
  makes when a job arrives before its release;
- **chain**: a canary released after 20 or more hops of one second, each one
  an invocation of the runner that sends the next: Lambda's recursive loop
  detection stops such a chain at its 16th round unless the runner has
  ``RecursiveLoop: Allow``;
- **dead letter**: a canary that fails on purpose reaches the queue's DLQ with
  its reason (the runner's failure record), and verify deletes it.

And it reads the wiring back from the account and compares it with the
declaration: each queue's redrive policy (its DLQ, ``maxReceiveCount``),
each runner's recursion setting and event source mapping (enabled, batch size,
``MaximumConcurrency``, ``ReportBatchItemFailures``), and each alarm of the
queue (it exists; its state).

It leaves nothing behind: the canaries' status, claim and failure records
are deleted, and so is the dead-lettered canary, whatever the outcome. A
canary still in flight when verify gives up (or is interrupted) expires:
delivered after its ``expiresAt``, it is acknowledged without running and
leaves no record.
"""

from jobkit.ops.verify.canaries import CANARY_CHECKS, CANARY_DOMAIN, CANARY_LIFETIME_S, CHAIN_HOPS, Verify
from jobkit.ops.verify.check import Check, Clients, VerifyRefused

__all__ = [
    "CANARY_CHECKS",
    "CANARY_DOMAIN",
    "CANARY_LIFETIME_S",
    "CHAIN_HOPS",
    "Check",
    "Clients",
    "Verify",
    "VerifyRefused",
]
