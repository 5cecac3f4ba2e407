"""Job status, for the types that declare ``track_status``.

- :mod:`~jobkit.status.options`: the ``track_status`` key of jobs.toml
- :mod:`~jobkit.status.tracker`: what a job reports, and the runner records, per attempt
"""

from jobkit.core.moved import names_from as _names_from

#: The names the module ``status.py`` held before it became this package, for one release.
__getattr__ = _names_from(__name__, ("jobkit.status.tracker", "jobkit.records"))
