"""A TTL cache with an injectable clock: every AWS view in this package is one of these.

Refresh policy: an entry is served until ``ttl`` seconds after it was stored, then the next read calls
AWS again. Tests pass a fake clock (a callable returning seconds) instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

Clock = Callable[[], float]
"""Monotonic seconds; ``time.monotonic`` in production."""

V = TypeVar("V")


class TTLCache(Generic[V]):
    """Values that expire ``ttl`` seconds after they were stored."""

    def __init__(self, ttl: float, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[Hashable, tuple[float, V]] = {}

    def get(self, key: Hashable) -> V | None:
        """The value for ``key``, or None when absent or expired (expired entries are dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored, value = entry
        if self._clock() - stored >= self.ttl:
            del self._entries[key]
            return None
        return value

    def put(self, key: Hashable, value: V) -> V:
        """Store ``value`` under ``key`` now; returns it."""
        self._entries[key] = (self._clock(), value)
        return value

    def get_or_load(self, key: Hashable, load: Callable[[], V]) -> V:
        """Cached value, or ``load()`` stored and returned when absent/expired."""
        value = self.get(key)
        if value is None:
            value = self.put(key, load())
        return value

    def delete(self, key: Hashable) -> None:
        """Forget ``key`` (no error when absent)."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()

    def keys(self) -> list[Hashable]:
        """Keys of entries not yet expired."""
        return [key for key in list(self._entries) if self.get(key) is not None]
