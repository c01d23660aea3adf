"""Builders over the bundled us-east-1 catalog (real list prices and allocatable), one zone, for disruption tests
that assert dollars: a NodePool of named types and nodes running pods of exact requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.api.nodepool import Budget
from nodewright.cloud.catalog import load_instance_types
from nodewright.disruption import ClusterView, Node, Pool
from nodewright.pricing import MinimumSaving, PricingPolicy, parse_pricing_policy
from nodewright.scheduling import ExistingNode, NodePoolSpec, Pod, Requirement, Requirements

from .helpers import NOW, MiB

ZONE = "us-east-1a"
TYPES = {it.name: it for it in load_instance_types("us-east-1", zones=(ZONE,))}


def real_pool(name: str = "default", types: Sequence[str] = (), *, capacity_types: Sequence[str] = ("on-demand",),
              minimum: MinimumSaving | None = None, extra: Sequence[Requirement] = ()) -> Pool:
    """A NodePool offering ``types`` (all bundled types when empty) in us-east-1a."""
    reqs = Requirements([Requirement(L.NODEPOOL, False, (name,)),
                         Requirement(L.CAPACITY_TYPE, False, tuple(capacity_types)), *extra])
    offered = [TYPES[t] for t in types] if types else list(TYPES.values())
    return Pool(name, NodePoolSpec(name, reqs, labels={L.NODEPOOL: name}), offered, budgets=[Budget(nodes="100%")],
                minimum_saving=minimum or MinimumSaving())


def real_node(name: str, type_name: str, pods: Sequence[tuple[int, int]], *, pool: str = "default",
              capacity_type: str = "on-demand") -> Node:
    """A node of ``type_name`` at its catalog price running one pod per ``(cpu millicores, memory MiB)``."""
    it = TYPES[type_name]
    labels = {L.NODEPOOL: pool, L.INSTANCE_TYPE: type_name, L.ZONE: ZONE, L.CAPACITY_TYPE: capacity_type,
              L.HOSTNAME: name, **it.labels}
    bound = [Pod(namespace="default", name=f"{name}-{i}", labels={"app": name}, node_name=name,
                 requests={"cpu": cpu, "memory": mem * MiB, "pods": 1}) for i, (cpu, mem) in enumerate(pods)]
    price = next(o.price for o in it.offerings if o.capacity_type == capacity_type)
    view = ExistingNode(name=name, labels=labels, allocatable=it.allocatable(), pods=list(bound), price=price)
    return Node(name, f"{name}-claim", pool, view, bound, created=NOW - 86_400, price=price)


def remake(name: str, type_name: str, pods: Sequence[Pod]) -> Node:
    """A node of ``type_name`` running ``pods`` (their requests), for :func:`nodewright.disruption.replay.converge`."""
    return real_node(name, type_name, [(p.requests["cpu"], p.requests["memory"] // MiB) for p in pods])


def view_of(nodes: Sequence[Node], *pools: Pool) -> ClusterView:
    return ClusterView(nodes=list(nodes), pools={p.name: p for p in pools or (real_pool(),)})


def policy(spec: dict[str, Any]) -> PricingPolicy:
    return parse_pricing_policy({"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy",
                                 "metadata": {"name": "test"}, "spec": spec})
