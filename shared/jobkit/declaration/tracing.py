"""The tracing key of a job type: an X-Ray span per job, linked to the trace of
the request that pushed it (the runner's Trace stage, :mod:`jobkit.runner.stages.trace`;
the template gives the function active tracing and the build adds aws-xray-sdk)."""

from __future__ import annotations

from jobkit.declaration.options import flag

TRACING_OPTIONS = (
    flag(
        "tracing",
        "an X-Ray span per job, linked to the request that pushed it; the runner build then adds"
        " aws-xray-sdk (pip install 'jobkit-aws[tracing]' where the app is built)",
    ),
)
