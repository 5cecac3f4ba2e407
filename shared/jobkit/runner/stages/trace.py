"""A trace span per job of a ``tracing = true`` type: an X-Ray subsegment
opened with Powertools Tracer around ``run()``, annotated with the job and its
producer's trace.

Wired only in a runner whose queue has a traced type, and the tracer (with the
X-Ray SDK it loads) is built when the first traced job runs: tracing costs
nothing when it is off. The X-Ray SDK is not in the jobkit layer: the runner
build adds it to the function when a type is traced (``jobkit-aws[tracing]``).
Without it (a runner built some other way), the first traced job logs a
warning and jobs run without spans.

The producer's trace reaches the span two ways: Lambda continues the X-Ray
trace of the message's ``AWSTraceHeader`` (SQS's system attribute, which push
sets from ``_X_AMZN_TRACE_ID``), and the span carries the producer's trace ID
as the annotation ``producer_trace_id`` (X-Ray's form, also for a W3C
``traceparent``), so a search by it finds the jobs a request caused.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import threading
import traceback
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from jobkit.runner.delivery import Delivery, string_attribute_of
from jobkit.runner.stage import Run, Stage
from jobkit.sqs import TRACEPARENT_ATTRIBUTE, XRAY_SYSTEM_ATTRIBUTE

if TYPE_CHECKING:
    from jobkit.runner.stages import Parts, StageKit

log = logging.getLogger(__name__)

_XRAY_ROOT = re.compile(r"(?:^|;)\s*Root=(1-[0-9a-f]{8}-[0-9a-f]{24})")
_W3C_TRACE_ID = re.compile(r"00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def powertools_tracer() -> Any | None:
    """A Powertools Tracer, or None (with a warning) when the X-Ray SDK is missing."""
    if importlib.util.find_spec("aws_xray_sdk") is None:
        log.warning(
            "tracing = true, but aws-xray-sdk is not installed: jobs run without trace spans"
            " (install jobkit-aws[tracing] where sam build runs, or add aws-xray-sdk to the requirements)"
        )
        return None
    from aws_lambda_powertools import Tracer

    return Tracer(auto_patch=False)


class Trace(Stage):
    """Opens a span (``## {type}``) for each job of a traced type.

    Args:
        traced: the names of the queue's types with ``tracing = true``.
        tracer_factory: builds the tracer on first use (tests pass a fake);
            returning None turns the stage off.
    """

    @classmethod
    def from_kit(cls, kit: StageKit, parts: Parts) -> Trace:
        return cls([t.name for t in kit.job_types if t.tracing])

    def __init__(self, traced: Collection[str], tracer_factory: Callable[[], Any | None] = powertools_tracer) -> None:
        self._traced = frozenset(traced)
        self._factory: Callable[[], Any | None] | None = tracer_factory
        self._tracer: Any | None = None
        self._building = threading.Lock()  # jobs side by side: each waits for the one tracer

    def _provider(self) -> Any | None:
        if self._factory is not None:  # built once per container, on the first traced job
            with self._building:
                if self._factory is not None:
                    self._tracer = self._factory()
                    self._factory = None
        return self._tracer.provider if self._tracer is not None else None

    def start(self, delivery: Delivery, run: Run) -> None:
        if delivery.spec.type not in self._traced:
            return
        provider = self._provider()
        if provider is None:
            return
        span = provider.in_subsegment(name=f"## {delivery.spec.type}")
        subsegment = span.__enter__()
        try:
            _describe(subsegment, delivery)
        finally:
            run.when_done(lambda: _close(span, subsegment, run))


def _describe(subsegment: Any, delivery: Delivery) -> None:
    subsegment.put_annotation("job_type", delivery.spec.type)
    subsegment.put_annotation("job_id", delivery.spec.id)
    subsegment.put_annotation("attempt", delivery.attempt)
    if delivery.spec.domain is not None:
        subsegment.put_annotation("domain", delivery.spec.domain)
    if delivery.correlation_id is not None:
        subsegment.put_annotation("correlation_id", delivery.correlation_id)
    producer = producer_trace_id(delivery)
    if producer is not None:
        subsegment.put_annotation("producer_trace_id", producer)


def _close(span: Any, subsegment: Any, run: Run) -> None:
    error = run.error
    if error is not None:
        try:
            subsegment.add_exception(error, traceback.extract_tb(error.__traceback__))
        except Exception:
            log.debug("could not add the job's exception to its span", exc_info=True)
    span.__exit__(None, None, None)  # if the X-Ray SDK raises here, Run.done logs it and the outcome stands


def producer_trace_id(delivery: Delivery) -> str | None:
    """The X-Ray trace ID of the producer: its ``AWSTraceHeader``'s root, else its
    ``traceparent``'s trace ID in X-Ray's form (``1-{8 hex}-{24 hex}``)."""
    attributes = delivery.record.get("attributes")
    header = attributes.get(XRAY_SYSTEM_ATTRIBUTE) if isinstance(attributes, dict) else None
    root = _XRAY_ROOT.search(header) if isinstance(header, str) else None
    if root is not None:
        return root.group(1)
    w3c = _W3C_TRACE_ID.fullmatch(string_attribute_of(delivery.record, TRACEPARENT_ATTRIBUTE) or "")
    return f"1-{w3c.group(1)[:8]}-{w3c.group(1)[8:]}" if w3c is not None else None
