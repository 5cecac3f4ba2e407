"""The IDs of the jobs a job pushes: derived from the parent's, so that a
retried parent pushes the same children again (see :meth:`jobkit.push.JobQueueGroup.for_job`)."""

from __future__ import annotations

import threading
import uuid
from collections import Counter

from jobkit.core.spec import JobSpecification, canonical_json

#: The namespace of job IDs derived from a parent job's.
_CHILD_ID_NAMESPACE = uuid.UUID("6b7c3f0e-5d1a-4c8e-9a0b-2f4e6d8c1a3b")


def derived_job_id(parent: JobSpecification, child: JobSpecification, occurrence: int = 0) -> str:
    """The ID of a job that ``parent`` pushes without an ID of its own.

    It is the same on every attempt of the same parent message (its type,
    domain, ID and enqueue time) for the same child (its type, domain and
    params), and differs for another child, another parent, or the same parent
    ID pushed again later. ``occurrence`` counts identical children pushed in
    one attempt.
    """
    what = canonical_json({"type": child.type, "domain": child.domain or parent.domain, "params": child.params})
    name = "\x00".join([parent.type, parent.domain or "", parent.id, repr(parent.enqueued_at), what, str(occurrence)])
    return str(uuid.uuid5(_CHILD_ID_NAMESPACE, name))


class ChildIds:
    """Derives the IDs of the jobs one attempt of a parent pushes."""

    def __init__(self, parent: JobSpecification) -> None:
        self._parent = parent
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def parent(self) -> JobSpecification:
        """The job that pushes."""
        return self._parent

    def adopt(self, specs: list[JobSpecification], domain: str | None = None) -> list[JobSpecification]:
        """The jobs as the parent pushes them to ``domain``: IDs derived, and, if
        the parent is a batch's member, in its batch (those of its own domain)."""
        with self._lock:
            adopted = [self._derived(spec) if spec.id_generated else spec for spec in specs]
        batch, home = self._parent.batch, self._parent.domain
        if batch is None:
            return adopted
        return [s.replace(batch=batch) if s.batch is None and (s.domain or domain) == home else s for s in adopted]

    def _derived(self, spec: JobSpecification) -> JobSpecification:
        try:
            first = derived_job_id(self._parent, spec)
        except (TypeError, ValueError, RecursionError):
            return spec  # params push() will refuse, naming the job: keep its own ID
        occurrence = self._seen[first]
        self._seen[first] += 1
        return spec.replace(id=first if occurrence == 0 else derived_job_id(self._parent, spec, occurrence))
