"""editReached: say how far a template edit got, once its fan-out has ended.

Each edit's htmlCacheUpdate root is pushed in a batch (``group.batch``); the
leaves and remnants it pushes join it, so the batch ends after the last of
them. This job is the batch's ``on_complete``: ``params["batch"]`` holds its
counts. Jobs superseded by a newer edit of the same template are ``skipped``:
the newer edit purges those pages instead.
"""

from __future__ import annotations

from jobkit import Job


class EditReachedJob(Job):
    def run(self) -> bool:
        summary, edit, pages = self.params["batch"], self.params["edit"], self.params["pages"]
        ran, superseded, failed = summary["succeeded"], summary["skipped"], summary["dead_lettered"]
        if superseded == failed == 0:
            line = f"edit {edit} reached all {pages:,} pages: {ran:,} jobs ran"
        else:
            line = f"edit {edit} was overtaken: {ran:,} jobs ran, {superseded:,} superseded by a newer edit"
            line += f", {failed:,} dead-lettered" if failed else ""
        self.set_result({"edit": edit, "line": line, "batch": summary})
        return True
