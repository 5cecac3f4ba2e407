"""htmlCacheUpdate: purge the cached HTML of the pages that use a changed template.

Modelled on MediaWiki's HTMLCacheUpdateJob and BacklinkJobUtils. Editing a
template pushes one *root* job. A recursive job covers a range of the pages
that embed the template: it pushes up to ``LEAVES_PER_RUN`` *leaf* jobs of
``PAGES_PER_LEAF`` pages each, and one *remnant* job for the rest of its range,
so a fan-out of any size proceeds in bounded steps and the queue never holds
more than a few batches of it.

Every leaf and remnant carries the root's ``rootJobSignature`` and
``rootJobTimestamp``. When the template is edited again before they have run,
the newer root supersedes them: the runner acknowledges them without purging
anything twice, and a superseded remnant pushes no more leaves.
"""

from __future__ import annotations

import hashlib
from typing import Any

from jobkit import Job, JobSpecification

PAGES_PER_LEAF = 50  # MediaWiki's $wgUpdateRowsPerJob is 300
LEAVES_PER_RUN = 40


class HTMLCacheUpdateJob(Job):
    @classmethod
    def new_for_backlinks(
        cls, page: str, *, backlinks: int, domain: str | None = None, now: float | None = None
    ) -> JobSpecification:
        """The root job for an edit of ``page``, which ``backlinks`` pages embed."""
        params: dict[str, Any] = {
            "table": "templatelinks",
            "page": page,
            "recursive": True,
            "range": [0, backlinks],
            **Job.new_root_job_params(f"htmlCacheUpdate:templatelinks:{page}", now),
        }
        return JobSpecification("htmlCacheUpdate", params, domain=domain)

    def run(self) -> bool:
        if self.params.get("recursive"):
            self.push(self._partition())
            return True
        _purge(self.params["pages"])
        return True

    def _partition(self) -> list[JobSpecification]:
        start, end = self.params["range"]
        stop = min(end, start + PAGES_PER_LEAF * LEAVES_PER_RUN)
        common = {"table": self.params["table"], "page": self.params["page"], **self.root_job_params()}
        jobs = [
            JobSpecification(
                "htmlCacheUpdate",
                {**common, "pages": embedding_pages(self.params["page"], first, min(stop, first + PAGES_PER_LEAF))},
                domain=self.domain,
            )
            for first in range(start, stop, PAGES_PER_LEAF)
        ]
        if stop < end:
            jobs.append(
                JobSpecification(
                    "htmlCacheUpdate", {**common, "recursive": True, "range": [stop, end]}, domain=self.domain
                )
            )
        return jobs


def embedding_pages(template: str, start: int, stop: int) -> list[str]:
    """Stand-in for a templatelinks query: pages ``start`` to ``stop`` that embed ``template``."""
    return [f"Page {n} (uses {template})" for n in range(start, stop)]


def _purge(titles: list[str]) -> None:
    """Stand-in for a CDN purge: compute the cache keys the purge would send."""
    for title in titles:
        hashlib.sha1(title.encode("utf-8")).hexdigest()
