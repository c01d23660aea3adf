"""EC2 capacity reservations as ``reserved`` offerings (Karpenter v1.14, aws/karpenter-provider-aws
``designs/odcr.md`` and ``pkg/providers/capacityreservation``; read for behaviour, our own code).

A reservation selected by an EC2NodeClass's ``capacityReservationSelectorTerms`` adds, to its instance type, one
offering ``(zone, capacity type "reserved", reservation id)`` while it has instances available. Its price is the
type's on-demand price divided by :data:`RESERVED_PRICE_DIVISOR` (Karpenter's rule: already paid for, so nearly
free, yet a bigger reservation still costs more than a smaller one and every reservation is cheaper than any spot
or on-demand offering), so the scheduler prefers it through ``karpenter.sh/capacity-type``. A node launched into
one carries ``karpenter.sh/capacity-type: reserved``, ``karpenter.k8s.aws/capacity-reservation-id`` and
``karpenter.k8s.aws/capacity-reservation-type``.

Shapes: :class:`CapacityReservation` mirrors one ``DescribeCapacityReservations`` entry and one
``EC2NodeClass.status.capacityReservations`` entry (Karpenter's field names: ``id``, ``instanceType``,
``availabilityZone``, ``ownerID``, ``instanceMatchCriteria``, ``reservationType``, ``state``, ``endTime``; plus
``availableInstanceCount``, EC2's name, which Karpenter's status does not carry and ``simulate`` reads when given).

The ``ReservedCapacity`` feature gate (Karpenter's, on by default) is applied by both cloud providers through
:class:`ReservedCapacityGate`: while it is off, no class's reservations are resolved or offered (so nothing is
scheduled onto, or launched into, a reservation) and a class with ``capacityReservationSelectorTerms`` (or, in
``simulate``, a ``status.capacityReservations`` list) gets one warning line saying they are ignored. Source:
aws/karpenter-provider-aws ``ReservedCapacityResolver`` (no reserved offerings), the EC2NodeClass controller (the
capacity-reservation reconciler skipped) and kubernetes-sigs/karpenter ``offeringsToReserve`` (main, 2026-08-20).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.instancetype import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    InstanceType,
    Offering,
)

log = logging.getLogger(__name__)

#: Karpenter prices a reserved offering at its on-demand price divided by this.
RESERVED_PRICE_DIVISOR = 10_000_000


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """One active capacity reservation.

    Attributes:
        id: ``cr-...``.
        instance_type: e.g. ``"p5.48xlarge"``.
        zone: availability zone name.
        available: instances it can still take (``AvailableInstanceCount``).
        owner_id: 12-digit owning account.
        match_criteria: ``open`` or ``targeted``.
        reservation_type: ``default`` (ODCR) or ``capacity-block``.
        end_time: ISO 8601 end, or None (no end date).
    """

    id: str
    instance_type: str
    zone: str
    available: int
    owner_id: str = ""
    match_criteria: str = "open"
    reservation_type: str = "default"
    end_time: str | None = None

    def status(self) -> dict[str, Any]:
        """The ``EC2NodeClass.status.capacityReservations`` entry (Karpenter's shape)."""
        out: dict[str, Any] = {"id": self.id, "instanceType": self.instance_type, "availabilityZone": self.zone,
                               "ownerID": self.owner_id, "instanceMatchCriteria": self.match_criteria,
                               "reservationType": self.reservation_type, "state": "active"}
        if self.end_time:
            out["endTime"] = self.end_time
        return out


class ReservedCapacityGate:
    """Karpenter's ``ReservedCapacity`` feature gate as a cloud provider applies it (see module docstring).

    Args:
        enabled: the gate's value (``FEATURE_GATES``; Karpenter's default true).
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._warned: set[str] = set()

    def allows(self, nodeclass: str, selects: bool) -> bool:
        """Whether EC2NodeClass ``nodeclass``'s reservations may be used; ``selects``: the class names some. While
        the gate is off, the first call for a class that selects reservations logs one warning line."""
        if self.enabled:
            return True
        if selects and nodeclass not in self._warned:
            self._warned.add(nodeclass)
            log.warning("EC2NodeClass %s: capacityReservationSelectorTerms ignored, the ReservedCapacity feature "
                        "gate is off (FEATURE_GATES ReservedCapacity=true to use reservations)", nodeclass,
                        extra={"ec2nodeclass": nodeclass})
        return False


def from_status(entries: Iterable[Mapping[str, Any]] | None, unknown_count: int) -> list[CapacityReservation]:
    """Reservations from ``status.capacityReservations`` entries (not ``active`` ones skipped); an entry without
    ``availableInstanceCount`` gets ``unknown_count``. Entries missing ``id``, ``instanceType`` or
    ``availabilityZone`` are skipped (the API server's schema requires them)."""
    out = []
    for e in entries or ():
        if not isinstance(e, Mapping) or e.get("state", "active") != "active":
            continue
        if not (e.get("id") and e.get("instanceType") and e.get("availabilityZone")):
            continue
        count = e.get("availableInstanceCount", unknown_count)
        out.append(CapacityReservation(
            id=str(e["id"]), instance_type=str(e["instanceType"]), zone=str(e["availabilityZone"]),
            available=int(count) if isinstance(count, int) and not isinstance(count, bool) else unknown_count,
            owner_id=str(e.get("ownerID") or ""), match_criteria=str(e.get("instanceMatchCriteria") or "open"),
            reservation_type=str(e.get("reservationType") or "default"),
            end_time=str(e["endTime"]) if e.get("endTime") else None))
    return out


def reserved_price(instance_type: InstanceType, zone: str) -> float | None:
    """The reserved price of ``instance_type`` in ``zone``: its on-demand price / :data:`RESERVED_PRICE_DIVISOR`
    (None when the type has no on-demand offering there to price it)."""
    od = [o.price for o in instance_type.offerings if o.capacity_type == CAPACITY_TYPE_ON_DEMAND and o.zone == zone]
    if not od:
        od = [o.price for o in instance_type.offerings if o.capacity_type == CAPACITY_TYPE_ON_DEMAND]
    return min(od) / RESERVED_PRICE_DIVISOR if od else None


def with_reservations(types: Sequence[InstanceType], reservations: Iterable[CapacityReservation],
                      used: Mapping[str, int] | None = None) -> list[InstanceType]:
    """``types`` with one ``reserved`` offering per reservation of that type in one of the types' zones that still
    has room (``available`` minus ``used[id]`` > 0, kept as the offering's ``reservation_capacity``). Types without
    a reservation are returned as they are."""
    by_type: dict[str, list[tuple[CapacityReservation, int]]] = {}
    for r in reservations:
        room = r.available - (used or {}).get(r.id, 0)
        if room > 0:
            by_type.setdefault(r.instance_type, []).append((r, room))
    out = []
    for it in types:
        extra = []
        zone_ids = {o.zone: o.zone_id for o in it.offerings}
        for r, room in by_type.get(it.name, ()):
            price = reserved_price(it, r.zone)
            if r.zone in zone_ids and price is not None:
                extra.append(Offering(r.zone, CAPACITY_TYPE_RESERVED, price, zone_id=zone_ids[r.zone],
                                      reservation_id=r.id, reservation_capacity=room))
        out.append(dataclasses.replace(it, offerings=(*extra, *it.offerings)) if extra else it)
    return out


def reservation_labels(offering: Offering, kinds: Mapping[str, str]) -> dict[str, str]:
    """The reservation labels of a node launched into ``offering`` (empty unless it is reserved); ``kinds``:
    reservation id -> reservation type (``default`` when unknown)."""
    if not offering.reservation_id:
        return {}
    kind = kinds.get(offering.reservation_id, "default")
    return {L.CAPACITY_RESERVATION_ID: offering.reservation_id, L.CAPACITY_RESERVATION_TYPE: kind}
