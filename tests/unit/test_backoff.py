"""Retry delays grow exponentially, with jitter, up to the cap."""

from __future__ import annotations

import itertools
import random

from jobkit.declaration.type_options import Backoff
from jobkit.runner.backoff import retry_delay_s


def test_equal_jitter_delays_grow_with_every_attempt() -> None:
    backoff = Backoff(base_s=10, factor=2, cap_s=900, jitter=0.5)
    rng = random.Random(3)
    for _ in range(200):
        delays = [retry_delay_s(backoff, attempt, rng) for attempt in range(1, 6)]
        assert all(a <= b for a, b in itertools.pairwise(delays)), delays
        assert 5 <= delays[0] <= 10


def test_delays_are_capped() -> None:
    backoff = Backoff(base_s=10, factor=10, cap_s=60, jitter=0)
    assert [retry_delay_s(backoff, n, random.Random()) for n in (1, 2, 3, 9)] == [10, 60, 60, 60]


def test_full_jitter_can_be_zero_but_not_negative() -> None:
    backoff = Backoff(base_s=1, factor=1, cap_s=1, jitter=1)
    delays = {retry_delay_s(backoff, 1, random.Random(seed)) for seed in range(50)}
    assert delays <= {0, 1}
