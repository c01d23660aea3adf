"""Test doubles for controller tests: a fake clock, a fake cloud provider and a first-fit fake solver.

``FakeCloudProvider`` implements the ``CloudProvider`` protocol over a dict of instances. ``first_fit_solver``
stands in for ``nodewright.scheduling.schedule`` (same signature, same result types) while the real
scheduler is being implemented: one NodeClaim per NodePool holding every pending pod, on the cheapest
instance type that fits their summed requests.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.api.manifests import parse_nodeclaim
from nodewright.api.nodeclaim import NodeClaim
from nodewright.api.nodepool import NodePool
from nodewright.cloud.instancetype import InstanceType, Offering, Overhead
from nodewright.cloud.provider import NodeClaimNotFoundError, make_provider_id
from nodewright.kube.objects import format_time
from nodewright.quantities import add, fits
from nodewright.scheduling import NodeClaimPlan, Requirements, SchedulingResult, events

GiB = 1024**3


class FakeClock:
    """Settable epoch-seconds clock."""

    def __init__(self, now: float = 1_784_548_800.0) -> None:  # 2026-07-20T12:00:00Z
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def instance_type(name: str, cpu: int, mem_gib: int, pods: int, price: float, spot: float) -> InstanceType:
    offerings = tuple(
        Offering(zone, ct, p) for zone in ("us-east-1a", "us-east-1b") for ct, p in (("on-demand", price), ("spot", spot))
    )
    return InstanceType(
        name=name,
        labels={L.INSTANCE_TYPE: name, L.ARCH: "amd64", L.OS: "linux", L.INSTANCE_FAMILY: name.split(".")[0]},
        capacity={"cpu": cpu * 1000, "memory": mem_gib * GiB, "pods": pods},
        overhead=Overhead(kube_reserved={"cpu": 100, "memory": GiB // 4}),
        offerings=offerings,
    )


CATALOG = [
    instance_type("c5.large", 2, 4, 29, 0.085, 0.035),
    instance_type("m5.large", 2, 8, 29, 0.096, 0.040),
    instance_type("m5.xlarge", 4, 16, 58, 0.192, 0.080),
]


class FakeCloudProvider:
    """In-memory CloudProvider: launches the cheapest allowed offering of the NodeClaim's candidates."""

    name = "fake"

    def __init__(self, clock: FakeClock, catalog: Sequence[InstanceType] = tuple(CATALOG)) -> None:
        self.clock = clock
        self.catalog = list(catalog)
        self.instances: dict[str, dict[str, Any]] = {}
        self.create_errors: list[Exception] = []
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.spot_interrupted: list[tuple[str, str]] = []
        self._ids = itertools.count(1)

    def _allowed(self, claim: NodeClaim, key: str) -> set[str] | None:
        for req in claim.spec.requirements:
            if req.key == key and req.operator == "In":
                return set(req.values or [])
        return None

    def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        if self.create_errors:
            raise self.create_errors.pop(0)
        types = self._allowed(nodeclaim, L.INSTANCE_TYPE)
        zones = self._allowed(nodeclaim, L.ZONE)
        cts = self._allowed(nodeclaim, L.CAPACITY_TYPE)
        best: tuple[InstanceType, Offering] | None = None
        for it in self.catalog:
            if types is not None and it.name not in types:
                continue
            offering = it.cheapest_offering(zones, cts)
            if offering is not None and (best is None or offering.price < best[1].price):
                best = (it, offering)
        assert best is not None, "no offering"
        it, offering = best
        instance_id = f"i-{next(self._ids):017x}"
        pid = make_provider_id(offering.zone, instance_id)
        self.instances[instance_id] = {"claim": nodeclaim.metadata.name, "type": it.name, "zone": offering.zone,
                                       "capacity_type": offering.capacity_type, "launched": self.clock(),
                                       "pool": nodeclaim.nodepool}
        self.created.append(instance_id)
        doc = nodeclaim.to_manifest()
        doc["metadata"]["labels"] = {**doc["metadata"].get("labels", {}), **it.labels, L.ZONE: offering.zone,
                                     L.REGION: "us-east-1", L.CAPACITY_TYPE: offering.capacity_type}
        cap = it.capacity
        alloc = it.allocatable()
        doc["status"] = {"providerID": pid, "imageID": "ami-0123456789abcdef0",
                         "capacity": {"cpu": str(cap["cpu"] // 1000), "memory": f"{cap['memory'] // 1024}Ki",
                                      "pods": str(cap["pods"])},
                         "allocatable": {"cpu": f"{alloc['cpu']}m", "memory": f"{alloc['memory'] // 1024}Ki",
                                         "pods": str(alloc["pods"])}}
        return parse_nodeclaim(doc)

    def _view(self, instance_id: str) -> NodeClaim:
        inst = self.instances[instance_id]
        return parse_nodeclaim({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": inst["claim"], "creationTimestamp": format_time(inst["launched"]),
                         "labels": {L.NODEPOOL: inst["pool"] or "", L.INSTANCE_TYPE: inst["type"]}},
            "spec": {"requirements": [], "nodeClassRef": {"group": L.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"}},
            "status": {"providerID": make_provider_id(inst["zone"], instance_id)},
        })

    def delete(self, nodeclaim: NodeClaim) -> None:
        pid = (nodeclaim.status.provider_id if nodeclaim.status else None) or ""
        instance_id = pid.rsplit("/", 1)[-1]
        if instance_id not in self.instances:
            raise NodeClaimNotFoundError(pid)
        del self.instances[instance_id]
        self.deleted.append(instance_id)

    def get(self, provider_id: str) -> NodeClaim:
        instance_id = provider_id.rsplit("/", 1)[-1]
        if instance_id not in self.instances:
            raise NodeClaimNotFoundError(provider_id)
        return self._view(instance_id)

    def list(self) -> list[NodeClaim]:
        return [self._view(i) for i in self.instances]

    def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        return list(self.catalog)

    def mark_spot_interrupted(self, instance_type: str, zone: str) -> None:
        self.spot_interrupted.append((instance_type, zone))

    def is_drifted(self, nodeclaim: NodeClaim) -> str | None:
        return None


def first_fit_solver(pods: Sequence[Any], nodes: Sequence[Any], nodepools: Sequence[Any],
                     instance_types: Mapping[str, Sequence[InstanceType]], **_: Any) -> SchedulingResult:
    """One on-demand NodeClaim on the first NodePool for all pods, cheapest fitting type (a stand-in scheduler);
    its events are the sentences the scheduler would return for that decision."""
    result = _first_fit(pods, nodepools, instance_types)
    result.events = [events.found(len(pods)), *events.outcome(result)]
    return result


def _first_fit(pods: Sequence[Any], nodepools: Sequence[Any],
               instance_types: Mapping[str, Sequence[InstanceType]]) -> SchedulingResult:
    result = SchedulingResult()
    if not nodepools or not pods:
        for pod in pods:
            result.unschedulable[pod.key] = "no nodepool"
        return result
    pool = nodepools[0]
    total: dict[str, int] = {}
    for pod in pods:
        total = add(total, pod.requests)
    candidates = sorted((it for it in instance_types[pool.name] if fits(total, it.allocatable())),
                        key=lambda it: it.cheapest_offering(capacity_types=["on-demand"]).price)  # type: ignore[union-attr]
    if not candidates:
        for pod in pods:
            result.unschedulable[pod.key] = "too big"
        return result
    cheapest = candidates[0]
    offering = cheapest.cheapest_offering(capacity_types=["on-demand"])
    assert offering is not None
    reqs = Requirements.from_expressions([
        {"key": L.NODEPOOL, "operator": "In", "values": [pool.name]},
        {"key": L.INSTANCE_TYPE, "operator": "In", "values": [c.name for c in candidates]},
        {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    ])
    result.new_nodeclaims.append(NodeClaimPlan(
        nodepool=pool.name, instance_types=candidates, instance_type=cheapest, offering=offering,
        requirements=reqs, labels={L.NODEPOOL: pool.name}, taints=(), startup_taints=(), pods=list(pods),
        requests=total, daemonset_overhead={}))
    return result
