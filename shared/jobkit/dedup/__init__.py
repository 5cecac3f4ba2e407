"""Admission: whether a job runs, by root/leaf supersession, ignoreDuplicates
claims and delivery claims.

:class:`DedupStore` holds the logic: what a claim means, leases,
time-to-live, and fail-open; the roots and the container's cache of them are
:class:`~jobkit.dedup.roots.RootCache`'s, and the records of attempts
:class:`~jobkit.records.journal.AttemptJournal`'s. A
:class:`~jobkit.records.store.Records` stores the records: DynamoDB in
production (:mod:`jobkit.records.dynamodb`), memory in unit tests
(:mod:`jobkit.records.memory`). Every backend write that can lose is one
conditional write that reports what it lost to, so no second read is ever
needed.

The semantics (docs/deduplication.md):

- **Supersession** (:mod:`jobkit.dedup.roots`). A job whose rootJobTimestamp is
  strictly older than the newest recorded for its root is superseded.
- **ignoreDuplicates.** Job J, enqueued at E(J), is a duplicate if a job with
  the same dedup hash *started after* E(J) *and succeeded*. J claims the hash
  before it runs; a twin that meets a live claim is deferred, not dropped; a
  failed run releases the claim so twins run::

      t ─────────────────────────────────────────────────────────────►
      E(T1)   E(J)     J claims, starts at S      J succeeds: last_success_start = S
        │      │        │                          │
        T1 arrives while J holds the claim ─► deferred; later: S > E(T1) ─► duplicate
                             E(T2) > S ─► T2 is not a duplicate of J: it runs

- **Delivery claims** (``deliver_once`` types) claim the job ID, so a second
  delivery of the same message does not run it again.
- **Nothing skipped leaves a trace that skips others.** Claims come first; a
  job's root timestamp is written only once the job is sure to run (a root
  that is skipped as a duplicate must not supersede the leaves of the run it
  duplicates), and claims taken by a job that turns out superseded are released.
- **Fail-open.** If the backend is unreachable or throttled, the job runs; the
  admission says so, and the runner logs and counts it.
- **A batch at once.** :meth:`DedupStore.admit_batch` sends the claims of a
  batch's jobs together, so they take one round trip, not one each; a job that
  shares a claim key with an earlier job of the batch is admitted on its own
  turn instead, after that job's claims are settled, exactly as if the batch
  were admitted one job at a time. :meth:`DedupStore.settle_in_background`
  settles an attempt's claims while the next job runs; a later claim on the
  same key waits for it.
"""

from jobkit.core.moved import names_from as _names_from

#: The names the module ``dedup.py`` held before it became this package, for one release.
__getattr__ = _names_from(
    __name__, ("jobkit.dedup.store", "jobkit.dedup.admission", "jobkit.dedup.roots", "jobkit.records")
)
