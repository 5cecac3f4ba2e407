"""CloudWatch metrics as EMF (embedded metric format), per job type.

Under the declaration's namespace, with the dimension ``JobType``:

==========================  ============  ===============================================
metric                      unit          what
==========================  ============  ===============================================
``PickupDelay``             Milliseconds  start minus ready time (release, else enqueue)
``RootJobAge``              Milliseconds  start minus rootJobTimestamp, for jobs with root params
``RunTime``                 Milliseconds  how long ``run()`` took
``Succeeded``               Count         attempts that succeeded
``Failed``                  Count         attempts that failed (retried or dead-lettered)
``Retried``                 Count         failed attempts that will be retried
``DeadLettered``            Count         messages moved to the DLQ (failures and poison)
``Poisoned``                Count         unparseable or unresolvable messages (also in DeadLettered)
``Duplicate``               Count         skipped: an identical later run succeeded
``Superseded``              Count         skipped: a newer root job replaced the leaf
``Deferred``                Count         re-enqueued while an identical job ran, held back (Limited), or a
                                          callback waiting for the dedup store
``Delayed``                 Count         re-enqueued until the release time (delay hops)
``Redelivered``             Count         skipped: a deliver_once job that already ran
``Debounced``               Count         skipped: a job with its debounce key pushed later owns the run
``Limited``                 Count         held back by a concurrency or rate limit (also in Deferred)
``DedupStoreUnavailable``   Count         jobs run without the dedup store (fail-open)
==========================  ============  ===============================================

A job of a priority lane (:mod:`jobkit.declaration.lanes`) adds its
``PickupDelay`` to a document with the dimensions ``JobType`` and
``Priority`` too: how long each lane waits. Jobs of a queue's own lane add
nothing, so a type without lanes writes what it wrote before.

Powertools' ``EphemeralMetrics`` builds the first EMF document of each set of
metric names (it keeps no state between instances, so metrics never leak from
one batch or test to the next); later batches reuse its definitions and
dimensions with their own values and time.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any, TextIO

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from jobkit.core.outcome import RecordResult

DIMENSION = "JobType"
#: The second dimension of a priority lane's pickup delays.
PRIORITY_DIMENSION = "Priority"
# EMF allows 100 values per metric in one document, and Powertools prints a
# document on its own once a metric reaches 100; stay below so that every
# document goes to our stream.
MAX_VALUES_PER_DOCUMENT = 99

#: How many sets of metric names a container keeps the definitions of (a handful in practice).
_MAX_SKELETONS = 256

_TIMINGS = {"PickupDelay": "pickup_delay_ms", "RootJobAge": "root_job_age_ms", "RunTime": "run_time_ms"}


class EmfMetrics:
    """Collects record results and writes one EMF document per job type on flush.

    Args:
        namespace: the CloudWatch namespace (``Declaration.namespace``).
        stream: where the documents go; Lambda ships stdout to CloudWatch Logs.
    """

    def __init__(self, namespace: str, stream: TextIO | None = None) -> None:
        self._namespace = namespace
        self._stream = stream
        self._counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self._timings: defaultdict[str, defaultdict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self._lane_delays: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
        self._skeletons: dict[tuple[Any, ...], tuple[Any, dict[str, Any]]] = {}

    def record(self, result: RecordResult) -> None:
        counts = self._counts[result.job_type]
        counts.update(result.outcome.metrics)
        if result.failed:
            counts["Failed"] += 1
        if result.dedup_unavailable:
            counts["DedupStoreUnavailable"] += 1
        for metric, attribute in _TIMINGS.items():
            value = getattr(result, attribute)
            if value is not None:
                # to the hundredth of a millisecond: more digits cost log bytes, not insight
                self._timings[result.job_type][metric].append(round(value, 2))
        if result.priority is not None and result.pickup_delay_ms is not None:
            self._lane_delays[(result.job_type, result.priority)].append(round(result.pickup_delay_ms, 2))

    def flush(self) -> None:
        """Write what was recorded, and forget it first: a write that fails
        loses this batch's metrics rather than counting them again in the next."""
        stream = self._stream or sys.stdout
        counts, timings, lanes = self._counts, self._timings, self._lane_delays
        self._counts, self._timings = defaultdict(Counter), defaultdict(lambda: defaultdict(list))
        self._lane_delays = defaultdict(list)
        for job_type in sorted(set(counts) | set(timings)):
            for document in self._documents(job_type, counts.get(job_type, Counter()), timings.get(job_type, {})):
                stream.write(json.dumps(document, separators=(",", ":")) + "\n")
        for (job_type, priority), delays in sorted(lanes.items()):
            lane = {PRIORITY_DIMENSION: priority}
            for document in self._documents(job_type, Counter(), {"PickupDelay": delays}, lane):
                stream.write(json.dumps(document, separators=(",", ":")) + "\n")
        stream.flush()

    def _documents(
        self,
        job_type: str,
        counts: Mapping[str, int],
        timings: Mapping[str, list[float]],
        dimensions: Mapping[str, str] | None = None,
    ) -> list[Any]:
        """The EMF documents of one job type (and lane): Powertools' own, its
        definitions made once per set of metric names and kept, since only the
        values and the time change from one batch to the next."""
        chunks = max([1] + [-(-len(values) // MAX_VALUES_PER_DOCUMENT) for values in timings.values()])
        documents = []
        for chunk in range(chunks):
            start = chunk * MAX_VALUES_PER_DOCUMENT
            values: dict[str, list[float]] = (
                {name: [float(count)] for name, count in counts.items()} if chunk == 0 else {}
            )
            values.update(
                (name, part)
                for name, series in timings.items()
                if (part := series[start : start + MAX_VALUES_PER_DOCUMENT])
            )
            key = (job_type, tuple((dimensions or {}).items()), tuple(values))
            skeleton = self._skeletons.get(key)
            if skeleton is None:
                skeleton = self._skeleton(job_type, dict(counts) if chunk == 0 else {}, values, dimensions)
                if len(self._skeletons) >= _MAX_SKELETONS:
                    self._skeletons.clear()
                self._skeletons[key] = skeleton
            definitions, dimension_values = skeleton
            aws = {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": definitions}
            documents.append({"_aws": aws, **dimension_values, **values})
        return documents

    def _skeleton(
        self,
        job_type: str,
        counts: Mapping[str, int],
        values: Mapping[str, list[float]],
        dimensions: Mapping[str, str] | None,
    ) -> tuple[Any, dict[str, Any]]:
        """What Powertools writes for these metrics, but their values and time:
        the definitions (``CloudWatchMetrics``) and the dimensions' values."""
        document = powertools_document(self._namespace, job_type, counts, values, dimensions)
        dimension_values = {k: v for k, v in document.items() if k != "_aws" and k not in values}
        return document["_aws"]["CloudWatchMetrics"], dimension_values


def powertools_document(
    namespace: str,
    job_type: str,
    counts: Mapping[str, int],
    values: Mapping[str, list[float]],
    dimensions: Mapping[str, str] | None = None,
) -> Any:
    """One EMF document as Powertools' ``EphemeralMetrics`` builds it (its
    ``service`` dimension, its checks): counts added as metrics, the timings'
    values as they are (rounded when recorded), one definition per metric."""
    metrics = EphemeralMetrics(namespace=namespace)
    metrics.add_dimension(DIMENSION, job_type)
    for name, value in (dimensions or {}).items():
        metrics.add_dimension(name, value)
    for name, count in counts.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    timed = {
        name: {"Unit": MetricUnit.Milliseconds.value, "StorageResolution": 60, "Value": list(series)}
        for name, series in values.items()
        if name not in counts
    }
    return metrics.serialize_metric_set(metrics={**metrics.metric_set, **timed})
