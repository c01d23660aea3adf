"""Exponential backoff: the one retry policy of the codebase.

Used per key by the controllers (a pod's eviction refused by a PodDisruptionBudget, a NodeClaim's failed
launch, an EC2NodeClass's failed resolution, a pod's failed bind), by the Kubernetes adapter for writes the API
server refused (403, 409, 5xx), by the informers after a failed list/watch, and by the AWS provider after an
authorization error. The shape follows client-go's ``wait.Backoff`` / controller-runtime's per-item rate limiter:
the n-th consecutive failure waits ``min(maximum, initial * factor**(n-1))`` seconds, optionally shortened by up
to ``jitter`` of itself so replicas do not retry in lockstep; a success forgets the key.

Times are plain epoch (or monotonic) seconds supplied by the caller, so the simulator's clock drives it too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Per-key exponential backoff (seconds).

    Attributes:
        initial: delay after the first failure.
        maximum: cap on any delay.
        factor: growth per consecutive failure.
        jitter: fraction (0..1) of each delay that is randomised away: the delay lies in
            ``[d * (1 - jitter), d]``.
        rng: random source for the jitter (seed it in tests).
    """

    initial: float = 1.0
    maximum: float = 60.0
    factor: float = 2.0
    jitter: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    # key -> (earliest next attempt, consecutive failures, last delay)
    _state: dict[str, tuple[float, int, float]] = field(default_factory=dict)

    def ready(self, key: str, now: float) -> bool:
        """True when ``key`` may be tried at ``now`` (never failed, or its delay has passed)."""
        entry = self._state.get(key)
        return entry is None or now >= entry[0]

    def failed(self, key: str, now: float) -> float:
        """Record a failure of ``key`` at ``now``; returns the delay (seconds) until the next attempt."""
        _, failures, _ = self._state.get(key, (0.0, 0, 0.0))
        delay = min(self.maximum, self.initial * self.factor**failures)
        if self.jitter:
            delay *= 1 - self.jitter * self.rng.random()
        self._state[key] = (now + delay, failures + 1, delay)
        return delay

    def succeeded(self, key: str) -> None:
        """Forget ``key`` (the next failure starts again at ``initial``)."""
        self._state.pop(key, None)

    def failures(self, key: str) -> int:
        """Consecutive failures recorded for ``key``."""
        entry = self._state.get(key)
        return entry[1] if entry else 0

    def delay(self, key: str) -> float:
        """The last delay handed out for ``key`` (0.0 when it has none)."""
        entry = self._state.get(key)
        return entry[2] if entry else 0.0

    def prune(self, keep: Callable[[str], bool]) -> None:
        """Drop the entries whose key ``keep`` rejects (bounded memory)."""
        for key in [k for k in self._state if not keep(k)]:
            del self._state[key]

    # --- one unnamed key: a loop that retries a single thing (an informer's list/watch) ----------------

    def next_delay(self) -> float:
        """Record one more failure of the single, unnamed key; returns the delay before the next attempt."""
        return self.failed("", 0.0)

    def reset(self) -> None:
        """Forget the unnamed key after a success."""
        self.succeeded("")
