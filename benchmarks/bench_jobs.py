"""Job classes for the benchmarks: they do nothing, so what is measured is jobkit."""

from __future__ import annotations

from jobkit import Job


class NoopJob(Job):
    def run(self) -> bool:
        return True
