"""nodewright.backoff.Backoff: the one retry policy (per key, exponential, capped, optional jitter)."""

from __future__ import annotations

import random

from nodewright.backoff import Backoff


def test_per_key_delays_double_up_to_the_cap_and_reset_on_success() -> None:
    backoff = Backoff(initial=1.0, maximum=5.0)
    assert backoff.ready("a", 0.0)
    assert [backoff.failed("a", 0.0) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.failures("a") == 5 and backoff.delay("a") == 5.0
    assert not backoff.ready("a", 4.9) and backoff.ready("a", 5.0)
    assert backoff.ready("b", 0.0)  # keys are independent
    backoff.succeeded("a")
    assert backoff.failures("a") == 0 and backoff.failed("a", 10.0) == 1.0


def test_jitter_shortens_each_delay_by_at_most_its_fraction() -> None:
    backoff = Backoff(initial=10.0, maximum=100.0, jitter=0.2, rng=random.Random(1))
    delays = [backoff.failed("k", 0.0) for _ in range(4)]
    assert all(base * 0.8 <= d <= base for d, base in zip(delays, (10.0, 20.0, 40.0, 80.0), strict=True))


def test_prune_and_the_single_unnamed_key() -> None:
    backoff = Backoff(initial=0.5, maximum=30.0)
    backoff.failed("keep", 0.0)
    backoff.failed("drop", 0.0)
    backoff.prune(lambda key: key == "keep")
    assert backoff.failures("keep") == 1 and backoff.failures("drop") == 0
    assert [backoff.next_delay() for _ in range(3)] == [0.5, 1.0, 2.0]
    backoff.reset()
    assert backoff.next_delay() == 0.5
