"""Builders for disruption tests: a small priced catalog, pools, nodes and pods with exact values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.api.hashing import NODEPOOL_HASH_VERSION
from nodewright.api.nodepool import Budget
from nodewright.cloud.instancetype import InstanceType, Offering, Overhead
from nodewright.disruption import ClusterView, Node, Pool
from nodewright.scheduling import ExistingNode, NodePoolSpec, Pod, Requirement, Requirements

GiB = 1024**3
MiB = 1024**2
NOW = 1_784_548_800.0  # 2026-07-20T12:00:00Z
HOUR = 3600.0
ZONES = ("us-east-1a", "us-east-1b")


def itype(name: str, cpu: int, mem_gib: int, od: float, spot: float | None = None, arch: str = "amd64",
          pods: int = 110) -> InstanceType:
    """An instance type with no overhead (allocatable == capacity) offered on-demand (and spot) in two zones."""
    offerings = [Offering(z, "on-demand", od) for z in ZONES]
    if spot is not None:
        offerings += [Offering(z, "spot", spot) for z in ZONES]
    return InstanceType(
        name=name,
        labels={L.INSTANCE_TYPE: name, L.ARCH: arch, L.OS: "linux", L.INSTANCE_FAMILY: name.split(".")[0],
                L.INSTANCE_CPU: str(cpu)},
        capacity={"cpu": cpu * 1000, "memory": mem_gib * GiB, "pods": pods},
        overhead=Overhead(),
        offerings=tuple(offerings),
    )


#: Prices are exact so savings are exact: small 2 cpu/4 GiB 0.10, medium 4/8 0.20, large 8/16 0.40.
SMALL = itype("c.small", 2, 4, 0.10, 0.04)
MEDIUM = itype("c.medium", 4, 8, 0.20, 0.08)
LARGE = itype("c.large", 8, 16, 0.40, 0.16)
CATALOG = [SMALL, MEDIUM, LARGE]
BY_NAME = {it.name: it for it in CATALOG}


def pool(name: str = "default", *, capacity_types: Sequence[str] = ("on-demand",), types: Sequence[InstanceType] = CATALOG,
         target: float | None = None, policy: str = "WhenEmptyOrUnderutilized", consolidate_after: float | None = 0.0,
         budgets: Sequence[Budget] | None = None, min_lifetime: float = 0.0, hysteresis: float = 0.1,
         taints: Sequence[Any] = (), hash: str = "h1") -> Pool:
    reqs = Requirements([Requirement(L.NODEPOOL, False, (name,)), Requirement(L.CAPACITY_TYPE, False, tuple(capacity_types))])
    spec = NodePoolSpec(name=name, requirements=reqs, labels={L.NODEPOOL: name}, taints=tuple(taints),
                        target_utilization=target)
    return Pool(name=name, spec=spec, instance_types=list(types), consolidation_policy=policy,
                consolidate_after=consolidate_after, budgets=list(budgets) if budgets is not None else [Budget(nodes="100%")],
                hash=hash, min_node_lifetime=min_lifetime, hysteresis=hysteresis)


def pod(name: str, cpu: int = 500, mem_mib: int = 512, *, ns: str = "default", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, priority: int = 0, **kw: Any) -> Pod:
    return Pod(namespace=ns, name=name, requests={"cpu": cpu, "memory": mem_mib * MiB, "pods": 1},
               labels=dict(labels or {"app": name.split("-")[0]}), annotations=dict(annotations or {}),
               priority=priority, **kw)


def node(name: str, it: InstanceType = MEDIUM, pods: Sequence[Pod] = (), *, nodepool: str = "default",
         capacity_type: str = "on-demand", zone: str = "us-east-1a", created: float = NOW - 10 * HOUR,
         price: float | None = None, daemonsets: Sequence[Pod] = (), hash: str | None = "h1", **kw: Any) -> Node:
    labels = {L.NODEPOOL: nodepool, L.INSTANCE_TYPE: it.name, L.ZONE: zone, L.CAPACITY_TYPE: capacity_type,
              L.HOSTNAME: name, **{k: v for k, v in it.labels.items()}}
    bound = [_bind(p, name) for p in pods]
    view = ExistingNode(name=name, labels=labels, allocatable=it.allocatable(), pods=[*bound, *daemonsets],
                        capacity=dict(it.capacity))
    if price is None:
        price = next(o.price for o in it.offerings if o.capacity_type == capacity_type)
    annotations = kw.pop("annotations", {})
    if hash is not None:
        annotations = {L.NODEPOOL_HASH: hash, L.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION, **annotations}
    return Node(name=name, nodeclaim=f"{name}-claim", nodepool=nodepool, view=view, pods=bound, created=created,
                price=price, annotations=annotations, **kw)


def _bind(p: Pod, node_name: str) -> Pod:
    p.node_name = node_name
    return p


def cluster(nodes: Sequence[Node], pools: Sequence[Pool] | None = None, **kw: Any) -> ClusterView:
    pls = list(pools) if pools is not None else [pool()]
    return ClusterView(nodes=list(nodes), pools={p.name: p for p in pls}, **kw)
