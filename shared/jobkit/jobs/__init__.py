"""What a job is: the :class:`~jobkit.jobs.job.Job` base class and its
context, the canary every runner serves, the IDs of the jobs a job pushes
(:mod:`.children`), and lazy pushes. Importing this package imports none of
its modules."""
