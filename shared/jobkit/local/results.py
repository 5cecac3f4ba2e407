"""Metrics sinks of the local stack: one keeps every record result (for the
demo, tools and tests), one puts what AWS would measure into the emulated
CloudWatch, and the runners' one line per succeeded job into the emulated
CloudWatch Logs (for ``jobkit top``, ``jobkit top --by domain`` and
``jobkit queues``)."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobkit.core.clock import Clock
from jobkit.core.outcome import Outcome, RecordResult
from jobkit.declaration.config import Declaration
from jobkit.local.moto_patches import SentCounts, drop_metric_data_before, oldest_message_age

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import DimensionTypeDef, MetricDatumTypeDef
    from mypy_boto3_sqs.client import SQSClient

log = logging.getLogger(__name__)


class ResultLog:
    """Collects :class:`~jobkit.core.outcome.RecordResult` objects from runners."""

    def __init__(self) -> None:
        self._results: list[RecordResult] = []
        self._lock = threading.Lock()

    def record(self, result: RecordResult) -> None:
        with self._lock:
            self._results.append(result)

    def flush(self) -> None:
        """Nothing to send: results stay in memory."""

    @property
    def results(self) -> list[RecordResult]:
        with self._lock:
            return list(self._results)

    def clear(self) -> None:
        with self._lock:
            self._results.clear()

    def of_type(self, job_type: str) -> list[RecordResult]:
        return [r for r in self.results if r.job_type == job_type]

    def outcomes(self, job_type: str | None = None) -> Counter[Outcome]:
        results: Iterable[RecordResult] = self.results if job_type is None else self.of_type(job_type)
        return Counter(r.outcome for r in results)

    def attempts(self, job_id: str) -> list[RecordResult]:
        """Every delivery of one job that ran, in order."""
        return [r for r in self.results if r.job_id == job_id and r.ran]


class EnqueueCounter:
    """Counts the jobs SQS accepted from SendMessageBatch calls (pushes), by job
    type, as the API saw them: an independent check on what the runners report.
    Re-enqueues (delay hops, deferrals) and DLQ copies use SendMessage and are
    not counted."""

    def __init__(self, sqs_client: SQSClient) -> None:
        self.by_type: Counter[str] = Counter()
        events = sqs_client.meta.events
        events.register("provide-client-params.sqs.SendMessageBatch", self._remember)
        events.register("after-call.sqs.SendMessageBatch", self._count)

    @staticmethod
    def _remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["enqueue_counter.entries"] = {e["Id"]: e for e in params.get("Entries", [])}

    def _count(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        entries = context.get("enqueue_counter.entries", {})
        for success in parsed.get("Successful", []):
            entry = entries.get(success["Id"], {})
            job_type = entry.get("MessageAttributes", {}).get("JobType", {}).get("StringValue", "unknown")
            self.by_type[job_type] += 1


#: Seconds of the stack's clock between two publications of :class:`MetricsPublisher`.
PUBLISH_INTERVAL_S = 5.0
#: How long the emulated CloudWatch keeps datapoints: ``jobkit top``'s longest window.
RETENTION_S = 3 * 3600
#: Datapoints per PutMetricData request: AWS takes 1,000, in at most 1 MB; 100
#: datapoints of 99 values each stay well under that.
MAX_DATA_PER_REQUEST = 100
#: Values per datapoint (AWS's limit for ``Values``).
MAX_VALUES_PER_DATUM = 150


class MetricsPublisher:
    """Puts into the emulated CloudWatch what AWS would have there, so that the
    ops views (``jobkit top``, ``jobkit queues``) read the local stack's
    metrics as they read AWS's, with the same GetMetricData queries:

    - the runners' metrics, as CloudWatch Logs extracts them from the EMF
      documents a runner writes (:class:`~jobkit.core.metrics.EmfMetrics`): the
      same namespace, ``JobType`` dimension, names and units, a document's
      list of values as raw values (so percentiles can be computed);
    - SQS's ``NumberOfMessagesSent`` and ``ApproximateAgeOfOldestMessage`` per
      declared queue, once the queue has had a message (SQS publishes for
      active queues), counting what other processes send through the server too;
    - in the runner's log group, the one JSON line a runner writes per job that
      succeeded (:func:`succeeded_line`), which the Contributor Insights rule
      behind ``jobkit top --by domain`` counts (:mod:`jobkit.template.insight`).
      Only those lines: nothing else of the runners' logs is read by a tool.

    Nothing is sent while a batch runs. :meth:`tick` (after each batch, and on
    each polling round of the stack) sends what was collected once every
    :data:`PUBLISH_INTERVAL_S` seconds of the clock, in PutMetricData requests
    of :data:`MAX_DATA_PER_REQUEST` datapoints, and drops datapoints older than
    :data:`RETENTION_S`. Publishing never fails the stack: a failed request is
    logged and its datapoints are lost, as a lost EMF line would be.

    Differences from AWS: datapoints are stamped with the stack's clock when a
    batch ends (Powertools stamps documents with the real time, which a
    virtual clock is not); SQS publishes its metrics once a minute, this every
    :data:`PUBLISH_INTERVAL_S` seconds, so a view is current sooner.
    """

    def __init__(
        self,
        cloudwatch: CloudWatchClient,
        declaration: Declaration,
        clock: Clock,
        sent: SentCounts,
        *,
        account_id: str,
        region: str,
        interval_s: float = PUBLISH_INTERVAL_S,
    ) -> None:
        from jobkit.core.metrics import EmfMetrics

        self._cloudwatch = cloudwatch
        self._declaration = declaration
        self._clock = clock
        self._sent = sent
        self._account_id = account_id
        self._region = region
        self._interval_s = interval_s
        self._documents = io.StringIO()
        self._emf = EmfMetrics(declaration.namespace, self._documents)
        self._pending: defaultdict[str, list[MetricDatumTypeDef]] = defaultdict(list)
        self._lines: defaultdict[str, list[str]] = defaultdict(list)  # log group: succeeded lines
        self._active: set[str] = set()  # SQS names of queues that have had a message
        self._lock = threading.Lock()
        self._next_at = clock.now() + interval_s
        self.requests = 0  # PutMetricData requests sent
        self.errors = 0  # and failed

    # -- the metrics port ------------------------------------------------------------

    def record(self, result: RecordResult) -> None:
        with self._lock:
            self._emf.record(result)
            line = succeeded_line(result, self._declaration.names.runner_service)
            job_type = self._declaration.types.get(result.job_type)
            if line is not None and job_type is not None:
                self._lines[self._declaration.names.log_group(job_type.queue)].append(line)

    def flush(self) -> None:
        """The batch ended: its metrics wait for the next publication."""
        with self._lock:
            self._emf.flush()
            text = self._documents.getvalue()
            self._documents.seek(0)
            self._documents.truncate()
            at = self._clock.now()
            for line in text.splitlines():
                for namespace, datum in emf_metric_data(json.loads(line), at):
                    self._pending[namespace].append(datum)
        self.tick()

    # -- publishing ------------------------------------------------------------------

    def tick(self) -> None:
        """Publish if the interval has passed since the last publication."""
        if self._clock.now() >= self._next_at:
            self.publish()

    def publish(self) -> None:
        """Put everything collected, and SQS's queue metrics now, into CloudWatch."""
        now = self._clock.now()
        with self._lock:
            pending, self._pending = self._pending, defaultdict(list)
            lines, self._lines = self._lines, defaultdict(list)
            self._next_at = now + self._interval_s
        pending["AWS/SQS"].extend(self._queue_metric_data(now))
        for namespace, data in pending.items():
            for start in range(0, len(data), MAX_DATA_PER_REQUEST):
                self._put(namespace, data[start : start + MAX_DATA_PER_REQUEST])
        # (moto's internals these read were checked when the stack started: jobkit.local.moto_patches.check)
        put_log_lines(self._account_id, self._region, lines, now, keep_s=RETENTION_S)
        drop_metric_data_before(self._account_id, self._region, now - RETENTION_S)

    def _put(self, namespace: str, data: list[MetricDatumTypeDef]) -> None:
        self.requests += 1
        try:
            self._cloudwatch.put_metric_data(Namespace=namespace, MetricData=data)
        except Exception:
            self.errors += 1
            log.warning("PutMetricData failed: %d datapoint(s) of %s lost", len(data), namespace, exc_info=True)

    def _queue_metric_data(self, now: float) -> Iterator[MetricDatumTypeDef]:
        sent = self._sent.take()
        stamp = _datetime(now)
        for key in self._declaration.lanes:  # every queue, each of its priority lanes a queue of its own
            name = self._declaration.queue_name(key)
            age = oldest_message_age(self._account_id, self._region, name, now)
            if sent[name] or age is not None:
                self._active.add(name)
            if name not in self._active:
                continue
            dimensions: list[DimensionTypeDef] = [{"Name": "QueueName", "Value": name}]
            yield {
                "MetricName": "NumberOfMessagesSent",
                "Dimensions": dimensions,
                "Timestamp": stamp,
                "Value": float(sent[name]),
                "Unit": "Count",
            }
            yield {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": dimensions,
                "Timestamp": stamp,
                "Value": float(round(age or 0.0)),
                "Unit": "Seconds",
            }


def emf_metric_data(document: dict[str, Any], at: float) -> Iterator[tuple[str, MetricDatumTypeDef]]:
    """The datapoints CloudWatch Logs extracts from one EMF document, with
    their namespaces: each metric once per dimension set, a list of values as
    raw values. Stamped ``at`` (epoch seconds) instead of the document's time."""
    stamp = _datetime(at)
    for directive in document["_aws"]["CloudWatchMetrics"]:
        for dimension_set in directive["Dimensions"]:
            dimensions: list[DimensionTypeDef] = [
                {"Name": name, "Value": str(document[name])} for name in dimension_set
            ]
            for metric in directive["Metrics"]:
                value = document.get(metric["Name"])
                if value is None:
                    continue
                values: Sequence[float] = value if isinstance(value, list) else [value]
                for start in range(0, len(values), MAX_VALUES_PER_DATUM):
                    datum: MetricDatumTypeDef = {
                        "MetricName": metric["Name"],
                        "Dimensions": dimensions,
                        "Timestamp": stamp,
                        "Values": [float(v) for v in values[start : start + MAX_VALUES_PER_DATUM]],
                        "Unit": metric.get("Unit", "None"),
                    }
                    yield directive["Namespace"], datum


#: The log stream the local stack writes the runners' lines to.
LOCAL_LOG_STREAM = "local"


def succeeded_line(result: RecordResult, service: str) -> str | None:
    """The JSON line a runner writes when a job succeeded, with the keys
    Powertools' formatter gives it (``jobkit.runner.loop``: the job's log keys
    and ``run_time_ms``; a key whose value is None left out, as Powertools
    does); ``None`` for any other result, which writes no INFO line."""
    if result.outcome is not Outcome.SUCCEEDED or result.run_time_ms is None:
        return None
    fields = {
        "level": "INFO",
        "location": "_run:0",
        "message": f"{result.job_type} {result.job_id} succeeded",
        "service": service,
        "job_id": result.job_id,
        "job_type": result.job_type,
        "domain": result.domain,
        "priority": result.priority,
        "run_time_ms": round(result.run_time_ms, 2),
    }
    return json.dumps({k: v for k, v in fields.items() if v is not None}, separators=(",", ":"))


def put_log_lines(account_id: str, region: str, lines: dict[str, list[str]], now: float, *, keep_s: float) -> None:
    """Write lines, stamped ``now``, into moto's CloudWatch Logs (its backend, as
    the stack's own process: no request), creating each log group and its
    stream on first use, and drop the stream's lines older than ``keep_s``."""
    from moto.logs.models import logs_backends

    backend = logs_backends[account_id][region]
    stamp = int(now * 1000)
    for group, messages in lines.items():
        if group not in backend.groups:
            backend.create_log_group(group, {})
        streams = backend.groups[group].streams
        if LOCAL_LOG_STREAM not in streams:
            backend.create_log_stream(group, LOCAL_LOG_STREAM)
        if messages:
            # Into the stream itself: moto's PutLogEvents drops events more than
            # 2 hours ahead of the real clock (as AWS does), and the stack's
            # clock may be virtual, far from it.
            streams[LOCAL_LOG_STREAM].put_log_events([{"timestamp": stamp, "message": m} for m in messages])
        events, oldest = streams[LOCAL_LOG_STREAM].events, stamp - int(keep_s * 1000)
        if events and events[0].timestamp < oldest:  # in the order they were put: the oldest first
            streams[LOCAL_LOG_STREAM].events = [event for event in events if event.timestamp >= oldest]


def _datetime(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


class Tee:
    """Hands each record result to several metrics sinks."""

    def __init__(self, *sinks: Any) -> None:
        self._sinks = sinks

    def record(self, result: Any) -> None:
        for sink in self._sinks:
            sink.record(result)

    def flush(self) -> None:
        for sink in self._sinks:
            sink.flush()
