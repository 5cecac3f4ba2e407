"""The job classes of ``jobkit demo``: MediaWiki's htmlCacheUpdate (a root
that fans out into leaves in bounded steps), refreshLinks (one page's parser
always fails) and enotifNotify, with stand-ins for the work, so what the demo
shows is the queue. The example app of jobkit's repository has fuller ones."""

from __future__ import annotations

from jobkit.core.errors import NonRetryableError
from jobkit.core.spec import JobSpecification
from jobkit.jobs.job import Job

PAGES_PER_LEAF = 50
LEAVES_PER_RUN = 40


class HTMLCacheUpdateJob(Job):
    """A recursive job pushes up to ``LEAVES_PER_RUN`` leaves of
    ``PAGES_PER_LEAF`` pages and one remnant for the rest of its range; every
    one carries the root's signature, so a newer edit supersedes them."""

    def run(self) -> bool:
        if not self.params.get("recursive"):
            return True  # a leaf: the purge of its pages
        start, end = self.params["range"]
        stop = min(end, start + PAGES_PER_LEAF * LEAVES_PER_RUN)
        common = {"table": self.params["table"], "page": self.params["page"], **self.root_job_params()}
        jobs = [
            JobSpecification("htmlCacheUpdate", {**common, "pages": [first, min(stop, first + PAGES_PER_LEAF)]})
            for first in range(start, stop, PAGES_PER_LEAF)
        ]
        if stop < end:
            jobs.append(JobSpecification("htmlCacheUpdate", {**common, "recursive": True, "range": [stop, end]}))
        self.push(jobs)  # to the job's own domain
        return True


class EditReachedJob(Job):
    """An edit's batch ended (its root, and every leaf and remnant it pushed):
    its result says how far the edit got."""

    def run(self) -> bool:
        summary, edit, pages = self.params["batch"], self.params["edit"], self.params["pages"]
        ran, superseded, failed = summary["succeeded"], summary["skipped"], summary["dead_lettered"]
        if superseded == failed == 0:
            line = f"edit {edit} reached all {pages:,} pages: {_jobs(ran)} ran"
        else:
            line = (
                f"edit {edit} was overtaken: {_jobs(ran)} ran, {_jobs(superseded)} superseded by a newer edit"
                + (f", {_jobs(failed)} dead-lettered" if failed else "")
                + " (the newer edit reached the rest)"
            )
        self.set_result({"edit": edit, "line": line, "batch": summary})
        return True


def _jobs(count: int) -> str:
    return f"{count:,} job" + ("" if count == 1 else "s")


class ParserError(Exception):
    """The stand-in parser failed on a page."""


class RefreshLinksJob(Job):
    def run(self) -> bool:
        title = self.params["title"]
        if title.startswith("Module:Broken"):  # the story's always-failing job: no retry fixes it
            raise ParserError(f"Lua error in {title} at line 7: attempt to index a nil value")
        return True


class EnotifNotifyJob(Job):
    def run(self) -> bool:
        if "@" not in self.params["recipient"]:
            raise NonRetryableError("param 'recipient' is not an email address")
        return True
