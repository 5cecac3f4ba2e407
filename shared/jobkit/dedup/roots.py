"""Root jobs' newest timestamps: the table's records and a container's cache of them.

A record per (domain, type, rootJobSignature) holds the newest
rootJobTimestamp seen; it only moves forward, and a job whose timestamp is
strictly older is superseded (MediaWiki's deduplicateRootJob). Each container
caches the newest timestamp per root: an older leaf is superseded without a
request, and a leaf that matches the newest runs without a request while the
cache entry is fresh. The push SDK records roots through the same cache as
the runner of its container, so a leaf pushed and run there sees its root at
once.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from jobkit.core.clock import Clock, SystemClock
from jobkit.core.errors import SpecError
from jobkit.core.spec import MAX_CLOCK_SKEW_S, JobSpecification
from jobkit.records import ROOT_RECORD_TTL_S

if TYPE_CHECKING:
    from jobkit.records.store import Records

log = logging.getLogger(__name__)

_Root = tuple[str, str | None, str]  # (type, domain, signature)


class RootCache:
    """The roots of one container, over the table's root records.

    Args:
        records: the jobs table.
        clock: the time source.
        ttl_s: how long a container trusts that a root timestamp it saw is
            still the newest. Older leaves are superseded from the cache at any
            age (timestamps only grow); within this window a newer root pushed
            elsewhere may let some old leaves run, which costs work, never
            correctness.
        size: roots remembered.
    """

    def __init__(
        self, records: Records, *, clock: Clock | None = None, ttl_s: float = 15.0, size: int = 10_000
    ) -> None:
        self._records = records
        self._clock = clock or SystemClock()
        self._ttl_s = ttl_s
        self._size = size
        self._roots: OrderedDict[_Root, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._roots)

    def record_root(self, spec: JobSpecification) -> None:
        """Record a root job's timestamp (MediaWiki's deduplicateRootJob).

        Raises:
            SpecError: the spec has no root-job params, or its timestamp is ahead
                of this clock by more than the allowed skew (it would supersede
                every real edit until it expires).
            TableUnavailable: the table could not be written.
        """
        spec.check_root_job_params()
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        if signature is None or timestamp is None:
            raise SpecError(f"{spec.type} {spec.id}: has no rootJobSignature/rootJobTimestamp params")
        if timestamp > self._clock.now() + MAX_CLOCK_SKEW_S:
            spec.check_times(self._clock.now())  # raises, naming the field and the skew
        self._advance(spec.type, spec.domain, signature, timestamp)

    def cached(self, spec: JobSpecification) -> bool | None:
        """Whether the cache knows the job to be superseded (True), knows its
        root to be the newest (False, while fresh), or cannot say (None: ask
        the table)."""
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        assert timestamp is not None and signature is not None
        with self._lock:
            cached = self._roots.get((spec.type, spec.domain, signature))
        if cached is None:
            return None
        newest, confirmed_at = cached
        if timestamp < newest:
            return True
        if timestamp == newest and self._clock.now() - confirmed_at < self._ttl_s:
            return False
        return None

    def superseded(self, spec: JobSpecification) -> bool:
        """Whether a newer root than the job's own is recorded, without recording
        the job's (a read, answered from the cache when it can): for a stage
        that must not let a superseded job take anything that makes other
        jobs skip (a debounce window), before the job is admitted.

        Raises:
            TableUnavailable: the table could not be read.
        """
        if not spec.has_root_job_params():
            return False
        cached = self.cached(spec)
        if cached is not None:
            return cached
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        assert timestamp is not None and signature is not None
        newest = self._records.newest_root(spec.type, spec.domain, signature)
        if newest is None or newest > self._clock.now() + MAX_CLOCK_SKEW_S:  # none, or one no clock made
            return False
        self._remember((spec.type, spec.domain, signature), newest)
        return timestamp < newest

    def advance(self, spec: JobSpecification) -> bool:
        """Record the job's root, now that it is about to run, and say whether
        a newer one supersedes it.

        Raises:
            TableUnavailable: the table could not be written.
        """
        timestamp, signature = spec.root_job_timestamp, spec.root_job_signature
        assert timestamp is not None and signature is not None
        newest = self._advance(spec.type, spec.domain, signature, timestamp)
        if newest > self._clock.now() + MAX_CLOCK_SKEW_S:
            # A record no clock could have made (a producer that wrote milliseconds):
            # it would supersede every real root for 28 days. Run the job instead.
            log.warning(
                "root record of %s %s is %.0f s ahead of this clock: ignored, the job runs",
                spec.type,
                signature,
                newest - self._clock.now(),
                extra={"job_id": spec.id, "job_type": spec.type, "domain": spec.domain},
            )
            return False
        return timestamp < newest

    def _advance(self, job_type: str, domain: str | None, signature: str, timestamp: float) -> float:
        expires_at = int(self._clock.now()) + ROOT_RECORD_TTL_S
        newest = self._records.advance_root(job_type, domain, signature, timestamp, expires_at)
        if newest <= self._clock.now() + MAX_CLOCK_SKEW_S:  # never cache a record from the future
            self._remember((job_type, domain, signature), newest)
        return newest

    def _remember(self, key: _Root, newest: float) -> None:
        now = self._clock.now()
        with self._lock:
            previous = self._roots.get(key)
            if previous is None or newest >= previous[0]:
                self._roots[key] = (newest, now)
            self._roots.move_to_end(key)
            while len(self._roots) > self._size:
                self._roots.popitem(last=False)
