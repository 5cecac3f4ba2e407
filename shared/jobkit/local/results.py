"""A metrics sink that keeps every record result, for the demo, tools and tests."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jobkit.outcome import Outcome, RecordResult

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class ResultLog:
    """Collects :class:`~jobkit.outcome.RecordResult` objects from runners."""

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
