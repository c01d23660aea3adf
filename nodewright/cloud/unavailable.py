"""Offerings that recently failed to launch, kept out of scheduling for a while.

One cache for every cloud provider (the AWS provider and the simulator's). Karpenter's behaviour: an
``InsufficientInstanceCapacity`` (and similar) fleet error marks the
(instance type, zone, capacity type) offering unavailable for 3 minutes; a spot interruption marks the spot
offering of the interrupted instance (:meth:`UnavailableOfferings.mark_spot_interrupted`). ``"*"`` in a key matches any instance type or zone, used for
account-wide limits such as ``MaxSpotInstanceCountExceeded``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Clock = Callable[[], float]

log = logging.getLogger(__name__)

#: Karpenter's unavailability window for an offering after a capacity error, in seconds.
UNAVAILABLE_TTL_SECONDS = 180.0
ANY = "*"

#: Fleet error codes that say "this offering has no capacity for us now" (EC2 CreateFleet error codes).
CAPACITY_ERROR_CODES = frozenset({
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "SpotMaxPriceTooLow",
    "ReservationCapacityExceeded",
    "InstanceLimitExceeded",
})


@dataclass(frozen=True, slots=True)
class OfferingKey:
    """An offering, or a wildcard family of them (``"*"`` for any type or zone)."""

    instance_type: str
    zone: str
    capacity_type: str


def key_for_error(code: str, instance_type: str, zone: str, capacity_type: str) -> OfferingKey:
    """Which offerings a fleet error code should mark unavailable.

    ``MaxSpotInstanceCountExceeded`` is an account-wide spot limit: every spot offering. ``VcpuLimitExceeded``
    is a regional quota: the type in every zone. Everything else: that one offering.
    """
    if code == "MaxSpotInstanceCountExceeded":
        return OfferingKey(ANY, ANY, capacity_type)
    if code in ("VcpuLimitExceeded", "InstanceLimitExceeded"):
        return OfferingKey(instance_type, ANY, capacity_type)
    return OfferingKey(instance_type, zone, capacity_type)


class UnavailableOfferings:
    """The set of offerings to skip, each until its own deadline."""

    def __init__(self, ttl: float = UNAVAILABLE_TTL_SECONDS, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._until: dict[OfferingKey, float] = {}
        self.generation = 0
        """Bumped on every change, so instance-type caches know to rebuild availability."""

    def mark(self, key: OfferingKey, reason: str, ttl: float | None = None) -> None:
        """Mark ``key`` unavailable for ``ttl`` (default :data:`UNAVAILABLE_TTL_SECONDS`) seconds."""
        self._until[key] = self._clock() + (self.ttl if ttl is None else ttl)
        self.generation += 1
        log.info("marked offering unavailable", extra={"instance_type": key.instance_type, "zone": key.zone,
                                                       "capacity_type": key.capacity_type, "reason": reason})

    def mark_spot_interrupted(self, instance_type: str, zone: str) -> None:
        """A spot interruption warning: the spot offering of that type in that zone is out for the TTL."""
        self.mark(OfferingKey(instance_type, zone, "spot"), "SpotInterruption")

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        """Whether the offering, or a wildcard covering it, is currently marked."""
        now = self._clock()
        for key in (OfferingKey(instance_type, zone, capacity_type), OfferingKey(instance_type, ANY, capacity_type),
                    OfferingKey(ANY, zone, capacity_type), OfferingKey(ANY, ANY, capacity_type)):
            until = self._until.get(key)
            if until is not None:
                if now < until:
                    return True
                del self._until[key]
                self.generation += 1
        return False

    def marked(self) -> list[OfferingKey]:
        """The keys marked now (expired marks dropped first)."""
        self.version()
        return list(self._until)

    def flag(self, instance_types: list[Any]) -> list[Any]:
        """``instance_types`` with the offerings marked now flagged ``available=False`` (copies of the types
        touched; the others returned as they are)."""
        keys = self.marked()
        if not keys:
            return instance_types
        names = {k.instance_type for k in keys}
        out = []
        for it in instance_types:
            if ANY in names or it.name in names:
                offerings = tuple(dataclasses.replace(o, available=False)
                                  if o.available and self.is_unavailable(it.name, o.zone, o.capacity_type) else o
                                  for o in it.offerings)
                if offerings != it.offerings:
                    it = dataclasses.replace(it, offerings=offerings)
            out.append(it)
        return out

    def version(self) -> int:
        """Drop expired marks, then return :attr:`generation` (a cache key for derived views)."""
        now = self._clock()
        expired = [key for key, until in self._until.items() if now >= until]
        for key in expired:
            del self._until[key]
        if expired:
            self.generation += 1
        return self.generation
