"""Ask the scheduler whether the pods of some candidates fit elsewhere, and on what.

One :class:`Simulator` per decision pass. Its destinations are the managed nodes that are initialized and not
being disrupted, plus unmanaged nodes; a destination in a NodePool with ``nodewright.io/target-utilization``
is offered to the scheduler with its cpu and memory allocatable scaled by that fraction, so consolidation never
packs a node above the target (new NodeClaims get the same treatment inside the scheduler). Uninitialized nodes
are not destinations: they may still fail to come up.

A candidate with pods no simulation can place again (:attr:`Node.unmovable`, DRA) fails its simulations without a
run, the pods unschedulable with their reason, and is recorded in :attr:`Simulator.blocked`. Each other
:meth:`Simulator.simulate` call is one :func:`nodewright.scheduling.schedule` run with the candidates'
nodes removed and their reschedulable pods pending (Karpenter's ``SimulateScheduling``); it costs O(cluster),
which is why the consolidation methods screen candidates cheaply first (:mod:`nodewright.disruption.screen`)
and count the calls here (:attr:`Simulator.calls`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nodewright.disruption.model import ClusterView, Node, Pool
from nodewright.quantities import CPU, MEMORY
from nodewright.scheduling import ExistingNode, SchedulingResult, schedule
from nodewright.scheduling.nodeclaimtemplate import PricingFactory
from nodewright.scheduling.nodepools import usage_of


def scaled_view(node: ExistingNode, target: float | None) -> ExistingNode:
    """``node`` with cpu/memory allocatable scaled by ``target`` (the node itself when ``target`` is None)."""
    if target is None:
        return node
    alloc = dict(node.allocatable)
    for name in (CPU, MEMORY):
        if name in alloc:
            alloc[name] = int(alloc[name] * target)
    return ExistingNode(
        name=node.name,
        labels=node.labels,
        allocatable=alloc,
        taints=node.taints,
        pods=node.pods,
        initialized=node.initialized,
        nodepool=node.nodepool,
        instance_type=node.instance_type,
        capacity_type=node.capacity_type,
        zone=node.zone,
        price=node.price,
        capacity=node.capacity,
        startup_taints=node.startup_taints,
        marked_for_deletion=node.marked_for_deletion,
        unschedulable=node.unschedulable,
    )


def destination_views(view: ClusterView) -> list[ExistingNode]:
    """The nodes moved pods may land on (see module docstring), target-scaled."""
    out = []
    for node in view.nodes:
        if node.deleting or not node.initialized:
            continue
        pool = view.pools.get(node.nodepool)
        out.append(scaled_view(node.view, pool.target_utilization if pool else None))
    out.extend(n for n in view.unmanaged if not n.marked_for_deletion)
    return out


def blocked_reason(node: Node) -> str:
    """Why simulations moving ``node``'s pods fail, as Karpenter's event sentence reads: the first unmovable pod
    and its reason, e.g. ``"pod default/train-0 cannot be rescheduled: pod has Dynamic Resource Allocation ..."``."""
    key, why = min(node.unmovable.items())
    more = len(node.unmovable) - 1
    return f"pod {key} cannot be rescheduled: {why}" + (f" (and {more} more pods)" if more else "")


class Simulator:
    """Scheduling simulations over one :class:`ClusterView`.

    Attributes:
        destinations: target-scaled destination nodes (see module docstring).
        calls: how many :func:`schedule` runs this simulator made.
    """

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.destinations = destination_views(view)
        # Static NodePools (spec.replicas) never get new NodeClaims from a disruption decision: their size is
        # the static controller's, which launches the successor of a static node that drift removed.
        self.pools: list[Pool] = [p for p in view.pools.values() if not p.static]
        self.instance_types = {p.name: list(p.instance_types) for p in self.pools}
        self.calls = 0
        #: node name -> why a simulation moving its pods failed before any run (:func:`blocked_reason`).
        self.blocked: dict[str, str] = {}
        # Greedy placement (Karpenter's): consolidation opens at most one NodeClaim, where the scheduler's
        # cost-optimal fleet search buys nothing and costs up to a second per simulation.
        self.optimize = False

    def simulate(self, candidates: Sequence[Node], max_new: int | None,
                 pricing: PricingFactory | None = None) -> SchedulingResult:
        """Schedule the candidates' reschedulable pods on every other destination plus at most ``max_new``
        new NodeClaims (None: any number). Pods that need more are in ``result.unschedulable``. ``pricing``: the
        scheduler's prices under a PricingPolicy (:meth:`~nodewright.disruption.pricing.MovePricing.
        scheduler_pricing`); None for list prices."""
        unmovable = {key: why for c in candidates for key, why in c.unmovable.items()}
        if unmovable:  # Karpenter's scheduler fails these pods (no run needed: the move is off either way)
            for c in candidates:
                if c.unmovable:
                    self.blocked[c.name] = blocked_reason(c)
            return SchedulingResult(unschedulable=unmovable)
        self.calls += 1
        gone = {c.name for c in candidates}
        nodes = [n for n in self.destinations if n.name not in gone]
        pods = [p for c in candidates for p in c.pods]
        # What the pools own without the candidates counts against their limits (Karpenter: the scheduler's
        # remaining resources over the active state nodes minus the candidates), so a replacement never takes a
        # pool over them.
        specs = [p.spec for p in self.pools]
        if any(s.limits is not None for s in specs):
            usage = usage_of(n.view for n in self.view.nodes if not n.deleting and n.name not in gone)
            specs = [replace(s, usage=usage.get(s.name, {})) if s.limits is not None else s for s in specs]
        return schedule(
            pods,
            nodes,
            specs,
            self.instance_types,
            daemonsets=self.view.daemonsets,
            max_new_nodeclaims=max_new,
            optimize=self.optimize,
            min_values_policy=self.view.min_values_policy,
            preference_policy=self.view.preference_policy,
            pricing=pricing,
        )
