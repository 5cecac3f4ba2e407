"""jobs.toml as types, queues and schedules: the option machinery
(:mod:`.options`), the core type keys (:mod:`.type_options`), the keys of
tracing and params schemas, schedules, and the composition of every
feature's keys (:mod:`.config`). Importing this package imports none of its modules."""
