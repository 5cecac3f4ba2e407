"""The local stack: jobkit on an embedded AWS (moto), for demos, tests and development.

Requires the ``local`` extra (``pip install jobkit[local]``).
"""

from __future__ import annotations

from jobkit.local.esm import EventSourceMapping
from jobkit.local.lambda_context import FakeLambdaContext
from jobkit.local.results import ResultLog
from jobkit.local.stack import LocalStack

__all__ = ["EventSourceMapping", "FakeLambdaContext", "LocalStack", "ResultLog"]
