"""The job classes of ``jobkit demo --scenario flow-control``: stand-ins that
do nothing, so what the demo measures is the queue, not the work."""

from __future__ import annotations

from jobkit.jobs.job import Job


class RenderPageJob(Job):
    """Renders ``params["page"]`` of its domain (a stand-in)."""

    def run(self) -> bool:
        return True


class CallPartnerApiJob(Job):
    """Calls the partner API of ``params["account"]`` (a stand-in)."""

    def run(self) -> bool:
        return True


class ReindexPageJob(Job):
    """Reindexes ``params["page"]`` for search (a stand-in)."""

    def run(self) -> bool:
        return True
