"""A metrics sink that keeps every record result, for the demo, tools and tests."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from jobkit.outcome import Outcome, RecordResult


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
