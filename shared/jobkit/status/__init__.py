"""Job status, for the types that declare ``track_status``.

- :mod:`~jobkit.status.options`: the ``track_status`` key of jobs.toml
- :mod:`~jobkit.status.tracker`: what a job reports, and the runner records, per attempt
"""
