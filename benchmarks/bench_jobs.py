"""Job classes for the benchmarks: they do nothing, so what is measured is jobkit."""

from __future__ import annotations

from jobkit import Job


class NoopJob(Job):
    def run(self) -> bool:
        return True


class WaitJob(Job):
    """Waits ``params["wait_ms"]`` as a job waits on the network (a call to another service)."""

    def run(self) -> bool:
        import time

        time.sleep(self.params.get("wait_ms", 100) / 1000)
        return True
