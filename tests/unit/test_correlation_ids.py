"""The correlation ID a job sent without one takes from its own ID: the ID
itself when it fits, else a deterministic 64-character one (docs/architecture.md,
"Traces and correlation")."""

from __future__ import annotations

import pytest

from jobkit.core.correlation import correlation_from_job_id, correlation_of, valid_correlation_id
from jobkit.core.wire import ID_PATTERN


@pytest.mark.parametrize("job_id", ["a", "sched-d32c5kddcf5bb8c3", "5b0c0e8e-3c1f-4a51-9a0e-1f0c2d3e4f5a", "x" * 64])
def test_an_id_that_fits_stays_as_it_is(job_id: str) -> None:
    assert correlation_from_job_id(job_id) == job_id
    assert correlation_of(None, job_id) == job_id


@pytest.mark.parametrize("length", [65, 66, 79, 80])
def test_a_longer_id_gives_a_valid_one_of_64_characters(length: int) -> None:
    job_id = ("import_2026-11-25-" * 5)[:length]
    assert ID_PATTERN.fullmatch(job_id)
    derived = correlation_from_job_id(job_id)
    assert derived is not None and len(derived) == 64
    assert valid_correlation_id(derived) == derived
    assert derived.startswith(job_id[:47] + ".")
    assert not ID_PATTERN.fullmatch(derived)  # never another job's own ID
    assert correlation_from_job_id(job_id) == derived  # the same every time, in every process


def test_long_ids_that_share_a_beginning_get_different_ones() -> None:
    parent = "p" * 70
    assert correlation_from_job_id(parent + "-1") != correlation_from_job_id(parent + "-2")


def test_a_valid_sent_one_wins_and_an_invalid_one_is_ignored() -> None:
    long_id = "y" * 80
    assert correlation_of("req-4711", long_id) == "req-4711"
    assert correlation_of("not valid: spaces", long_id) == correlation_from_job_id(long_id)
    assert correlation_of("z" * 65, long_id) == correlation_from_job_id(long_id)


@pytest.mark.parametrize("job_id", [None, "", "has spaces", 42])
def test_a_value_that_is_no_id_gives_none(job_id: object) -> None:
    assert correlation_from_job_id(job_id) is None
