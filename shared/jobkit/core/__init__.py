"""The vocabulary every other part of jobkit speaks: errors, the job
specification and its wire codec, outcomes, clocks, cron, correlation IDs,
parameter types, resource names and the metrics port. No AWS, no declaration.
Importing this package imports none of its modules."""
