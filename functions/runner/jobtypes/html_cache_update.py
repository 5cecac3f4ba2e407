"""htmlCacheUpdate: purge the cached HTML of the pages that use a changed template.

Modelled on MediaWiki's HTMLCacheUpdateJob. Editing a template pushes one
*root* job. The root job looks up the pages that embed the template and fans
out into *leaf* jobs of up to ``PAGES_PER_LEAF`` pages each. Every leaf carries
the root's ``rootJobSignature`` and ``rootJobTimestamp``, so when the template
is edited again before the leaves have run, the newer root supersedes them and
the runner acknowledges them without purging anything twice.
"""

from __future__ import annotations

import hashlib
from typing import Any

from jobkit import Job, JobSpecification

PAGES_PER_LEAF = 100  # MediaWiki's $wgUpdateRowsPerJob is 300


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
            "backlinks": backlinks,
            **Job.new_root_job_params(f"htmlCacheUpdate:templatelinks:{page}", now),
        }
        return JobSpecification("htmlCacheUpdate", params, domain=domain)

    def run(self) -> bool:
        if self.params.get("recursive"):
            self.push(self._leaves())
            return True
        _purge(self.params["pages"])
        return True

    def _leaves(self) -> list[JobSpecification]:
        titles = embedding_pages(self.params["page"], int(self.params["backlinks"]))
        return [
            JobSpecification(
                "htmlCacheUpdate",
                {
                    "table": self.params["table"],
                    "page": self.params["page"],
                    "pages": titles[start : start + PAGES_PER_LEAF],
                    **self.root_job_params(),
                },
                domain=self.domain,
            )
            for start in range(0, len(titles), PAGES_PER_LEAF)
        ]


def embedding_pages(template: str, count: int) -> list[str]:
    """Stand-in for a templatelinks query: the pages that embed ``template``."""
    return [f"Page {n} (uses {template})" for n in range(1, count + 1)]


def _purge(titles: list[str]) -> None:
    """Stand-in for a CDN purge: compute the cache keys the purge would send."""
    for title in titles:
        hashlib.sha1(title.encode("utf-8")).hexdigest()
