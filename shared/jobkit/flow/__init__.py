"""Flow control: what a job type declares about how fast and how fairly its
jobs run, and the records in the jobs table that enforce it.

- **fairness**: the push SDK sets each message's ``MessageGroupId`` from a key
  (the domain by default), and SQS fair queues keep a noisy key from starving
  the quiet ones (:mod:`jobkit.flow.fairness`);
- **concurrency**: at most N jobs with the same key run at once, across all
  containers (:mod:`jobkit.records.leases`);
- **rate limit**: at most R jobs a second with the same key, with bursts of B
  (:mod:`jobkit.records.token_buckets`);
- **debounce**: of the jobs with the same key pushed within a window, the
  latest runs; the earlier ones are acknowledged as debounced
  (:mod:`jobkit.records.debounce_windows`).

A job held back by a limit is deferred: sent again with a delay, which is not
an attempt. The runner's stages (:mod:`jobkit.runner.stages.limits`,
:mod:`jobkit.runner.stages.debounce`) use these; docs/flow-control.md states
the semantics.
"""
