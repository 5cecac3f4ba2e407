"""The local stack: jobkit on an embedded AWS (moto), for demos, tests and development.

Requires the ``local`` extra (``pip install 'jobkit-aws[local]'``).
"""

from __future__ import annotations

from jobkit.core.extras import require

require("local", "jobkit's local stack")

from jobkit.local.esm import EventSourceMapping  # noqa: E402
from jobkit.local.lambda_context import FakeLambdaContext  # noqa: E402
from jobkit.local.results import ResultLog  # noqa: E402
from jobkit.local.stack import LocalStack  # noqa: E402

__all__ = ["EventSourceMapping", "FakeLambdaContext", "LocalStack", "ResultLog"]
