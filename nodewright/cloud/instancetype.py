"""Instance types and offerings: the catalog contract shared by the scheduler and every cloud provider.

An :class:`InstanceType` is what the scheduler packs pods onto; an :class:`Offering` is one place it can be
bought (zone x capacity type) with its price. The AWS provider builds them from ``DescribeInstanceTypes``,
``DescribeInstanceTypeOfferings`` and the pricing APIs; the bundled catalog and the simulated cloud build them
from bundled data. Mirrors Karpenter's ``cloudprovider.InstanceType`` (capacity, overhead, offerings).

Units everywhere: ``cpu`` in millicores, ``memory`` / ``ephemeral-storage`` in bytes, ``pods`` and extended
resources (``nvidia.com/gpu``, ``aws.amazon.com/neuron``, ``vpc.amazonaws.com/efa``) as integer counts,
prices in USD per hour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from nodewright.api import labels as L

#: Resource name -> integer quantity in canonical units (see module docstring).
Resources = dict[str, int]

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"


@dataclass(frozen=True, slots=True)
class Offering:
    """One purchasable placement of an instance type.

    Attributes:
        zone: availability zone name, e.g. ``"us-east-1a"``.
        capacity_type: ``"spot"``, ``"on-demand"`` (or ``"reserved"``), the ``karpenter.sh/capacity-type`` value.
        price: USD per hour for one instance.
        available: False while the offering is known to be unavailable (e.g. after an
            ``InsufficientInstanceCapacity`` error, for Karpenter's 3-minute unavailability window).
        zone_id: the AZ id (``use1-az1``) when known, for ``topology.k8s.aws/zone-id``.
        reservation_id: for ``reserved`` offerings, the EC2 capacity reservation (``cr-...``) it launches into
            (:mod:`nodewright.cloud.reservations`); ``""`` otherwise.
        reservation_capacity: for ``reserved`` offerings, the instances the reservation can still take (Karpenter's
            ``Offering.ReservationCapacity``); a scheduling pass hands out at most that many NodeClaims
            (:mod:`nodewright.scheduling.reservations`). 0 otherwise.
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    zone_id: str = ""
    reservation_id: str = ""
    reservation_capacity: int = 0


class LaunchPricing(Protocol):
    """A launch's effective prices under a PricingPolicy (:class:`nodewright.pricing.MarginalPricing`): the cloud
    providers' ``launch_pricing`` hook returns one, so the launch follows the order the scheduler chose by."""

    def price(self, instance_type: str, offering: Offering) -> float:
        """USD/hour one more ``instance_type`` on ``offering`` adds to the bill."""
        ...


#: The cloud providers' ``launch_pricing`` hook: the launch's prices given the instance types (None: list prices).
LaunchPricingHook = Callable[[Sequence["InstanceType"]], LaunchPricing | None]


@dataclass(frozen=True, slots=True)
class Overhead:
    """Resources a node reserves for the system, subtracted from capacity to get allocatable.

    Attributes:
        kube_reserved: kubelet ``kubeReserved`` (EKS computes cpu tiers and ``255Mi + 11Mi x maxPods``).
        system_reserved: kubelet ``systemReserved``.
        eviction_threshold: kubelet hard eviction thresholds (``memory.available`` 100Mi by default).
    """

    kube_reserved: Resources = field(default_factory=dict)
    system_reserved: Resources = field(default_factory=dict)
    eviction_threshold: Resources = field(default_factory=dict)

    def total(self) -> Resources:
        """Sum of the three reservations, per resource."""
        return add_resources(self.kube_reserved, self.system_reserved, self.eviction_threshold)


@dataclass(frozen=True, slots=True)
class InstanceType:
    """An EC2 instance type as the scheduler sees it.

    Attributes:
        name: e.g. ``"m5.large"``.
        labels: single-valued well-known labels of any node of this type, spelled as Karpenter does:
            ``node.kubernetes.io/instance-type``, ``kubernetes.io/arch``, ``kubernetes.io/os``,
            ``karpenter.k8s.aws/instance-{category,family,generation,size,cpu,cpu-manufacturer,memory,
            network-bandwidth,hypervisor,gpu-*,local-nvme,...}``. Zone, region and capacity type are not here:
            they come from the :attr:`offerings`.
        capacity: what the node reports as capacity (memory already net of the VM overhead Karpenter subtracts).
        overhead: kubelet reservations; ``allocatable = capacity - overhead.total()``.
        offerings: every (zone, capacity type) this type is offered in, with prices.
        volume_limits: CSI driver -> volumes a new node of this type can attach (the AWS provider:
            ``ebs.csi.aws.com`` from ``EbsInfo.MaximumEbsAttachments``, :func:`nodewright.cloud.catalog.volume_limits`);
            a new NodeClaim takes no more distinct claims of a driver than this. Empty: no limit known.
    """

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, int]
    overhead: Overhead
    offerings: tuple[Offering, ...]
    volume_limits: Mapping[str, int] = field(default_factory=dict)

    def allocatable(self) -> Resources:
        """Capacity minus overhead, never below zero, per resource."""
        reserved = self.overhead.total()
        return {name: max(0, qty - reserved.get(name, 0)) for name, qty in self.capacity.items()}

    def cheapest_offering(
        self, zones: Iterable[str] | None = None, capacity_types: Iterable[str] | None = None
    ) -> Offering | None:
        """Cheapest available offering, optionally restricted to ``zones`` and ``capacity_types``.

        Returns None when no available offering matches.
        """
        zone_set = set(zones) if zones is not None else None
        type_set = set(capacity_types) if capacity_types is not None else None
        best: Offering | None = None
        for offering in self.offerings:
            if not offering.available:
                continue
            if zone_set is not None and offering.zone not in zone_set:
                continue
            if type_set is not None and offering.capacity_type not in type_set:
                continue
            if best is None or offering.price < best.price:
                best = offering
        return best


class PriceIndex:
    """A node's price, the one lookup: the cheapest offering of its instance type in its zone and capacity type.

    The node's labels name the offering (``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``,
    ``karpenter.sh/capacity-type``); USD per hour; 0.0 when the type or the offering is unknown (so an unknown
    node never looks like a saving). When a list holds two types of one name, the first wins. Built once per
    list of instance types (O(offerings)); each lookup is two dict reads.
    """

    def __init__(self, instance_types: Sequence[InstanceType]) -> None:
        self._prices: dict[str, dict[tuple[str, str], float]] = {}
        for it in instance_types:
            if it.name in self._prices:
                continue
            offers: dict[tuple[str, str], float] = {}
            for o in it.offerings:
                key = (o.zone, o.capacity_type)
                offers[key] = min(offers.get(key, o.price), o.price)
            self._prices[it.name] = offers

    def price(self, labels: Mapping[str, str]) -> float:
        """USD/hour of the offering ``labels`` name (0.0 when unknown)."""
        offers = self._prices.get(labels.get(L.INSTANCE_TYPE, ""))
        if offers is None:
            return 0.0
        return offers.get((labels.get(L.ZONE, ""), labels.get(L.CAPACITY_TYPE, "")), 0.0)


def add_resources(*many: Mapping[str, int]) -> Resources:
    """Per-resource sum of any number of resource maps."""
    total: Resources = {}
    for resources in many:
        for name, qty in resources.items():
            total[name] = total.get(name, 0) + qty
    return total
