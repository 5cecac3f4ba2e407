"""refreshLinks: re-parse a page and update its link tables.

Modelled on MediaWiki's RefreshLinksJob. Many edits queue the same page, so the
type is declared with ``remove_duplicates = true``: a job is skipped when an
identical one started after it was enqueued and succeeded. ``causeAction`` and
``causeAgent`` only say why the job was queued, so they do not make jobs differ.
"""

from __future__ import annotations

import hashlib
from typing import NotRequired, TypedDict

from jobkit import Job


class ParserError(Exception):
    """The stand-in parser failed on a page."""


class RefreshLinksJob(Job):
    class Params(TypedDict):
        """What the job reads (``jobkit schema refreshLinks --from-class`` prints it as JSON Schema)."""

        title: str
        causeAction: NotRequired[str]
        causeAgent: NotRequired[str]

    def run(self) -> bool:
        title = self.params["title"]
        if title.startswith("Module:Broken"):
            # The demo's always-failing job: a bug that no retry fixes.
            raise ParserError(f"Lua error in {title} at line 7: attempt to index a nil value")
        _parse(title)
        return True


def _parse(title: str) -> str:
    """Stand-in for parsing a page: the links it would record."""
    return hashlib.sha1(title.encode("utf-8")).hexdigest()
