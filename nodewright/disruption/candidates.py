"""Which nodes a method may disrupt, why the others may not, and in what order candidates are tried.

Candidate rules (Karpenter v1 ``disruption.NewCandidate`` / ``StateNode.ValidateNodeDisruptable`` /
``ValidatePodsDisruptable``), each returning the reason a node is *not* a candidate:

* its NodePool exists; it is initialized; it carries instance-type, zone and capacity-type labels;
* it is not already being deleted or disrupted;
* neither the Node nor the NodeClaim has ``karpenter.sh/do-not-disrupt: "true"``;
* no pod on it has ``karpenter.sh/do-not-disrupt: "true"``, none is covered by a PodDisruptionBudget that
  allows no disruption now and none is selected by more than one budget (the Eviction API refuses those pods,
  so the drain could never finish; :attr:`PDB.overlaps`) -- except for drift of a NodeClaim with ``terminationGracePeriod``, which bounds the
  drain anyway (Karpenter v1: eventual disruption ignores pod-level blockers when a grace period is set).

Consolidation (emptiness and under-utilization) additionally requires, per NodePool:

* the pool is not static (``spec.replicas``; Karpenter's consolidation skips static NodePools);

* ``consolidateAfter`` is not ``Never`` and has elapsed since the node's last pod event;
* ``nodewright.io/min-node-lifetime`` has elapsed since the NodeClaim was created (churn guard);
* for under-utilization: ``consolidationPolicy`` is ``WhenEmptyOrUnderutilized`` or ``Balanced`` (whose moves
  are then scored by :mod:`nodewright.disruption.balanced`), and when the pool has a
  ``nodewright.io/target-utilization`` the node's utilization is below ``target - hysteresis``.

Order: ascending disruption cost (Karpenter ``disruptionutils``): each pod costs ``1 + deletion-cost/2^27 +
priority/2^25`` clamped to [-10, 10], summed, times the fraction of ``expireAfter`` the node has left.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nodewright.api import labels as L
from nodewright.disruption.model import (
    PDB,
    POD_DELETION_COST_ANNOTATION,
    REASON_DRIFTED,
    REASON_UNDERUTILIZED,
    Node,
    Pool,
)
from nodewright.quantities import CPU, MEMORY
from nodewright.scheduling import Pod

_REQUIRED_LABELS = (L.INSTANCE_TYPE, L.ZONE, L.CAPACITY_TYPE)


def pod_blocks_disruption(pod: Pod) -> bool:
    """``karpenter.sh/do-not-disrupt: "true"`` (or the v1alpha5 ``karpenter.sh/do-not-evict``) on the pod."""
    ann = pod.annotations
    return ann.get(L.DO_NOT_DISRUPT) == "true" or ann.get(L.V1ALPHA5_DO_NOT_EVICT) == "true"


def blocking_pdb(pod: Pod, pdbs: Iterable[PDB]) -> PDB | None:
    """A budget selecting ``pod`` that allows no disruption now, or None."""
    for pdb in pdbs:
        if pdb.disruptions_allowed <= 0 and pdb.selects(pod):
            return pdb
    return None


def pdb_overlap_problem(pod: Pod, pdbs: Iterable[PDB]) -> str | None:
    """Why ``pod`` can never be evicted because several budgets select it (:attr:`PDB.overlaps`), or None."""
    names = sorted(f"{pdb.namespace}/{pdb.name}" for pdb in pdbs if pod.key in pdb.overlaps)
    if len(names) < 2:
        return None
    return (f"pod {pod.key} is selected by more than one PodDisruptionBudget ({', '.join(names)}): "
            "the Eviction API refuses to evict it")


def pdb_overlap_blocks(nodes: Iterable[Node], pdbs: Sequence[PDB]) -> dict[str, str]:
    """Node name -> why its voluntary disruption is blocked by a pod several budgets select, for every node with
    one (Karpenter publishes a ``DisruptionBlocked`` event for each node that fails its candidate checks)."""
    if not any(pdb.overlaps for pdb in pdbs):
        return {}
    out: dict[str, str] = {}
    for node in nodes:
        for pod in node.pods:
            problem = pdb_overlap_problem(pod, pdbs)
            if problem is not None:
                out[node.name] = problem
                break
    return out


def base_problem(node: Node, pools: dict[str, Pool], pdbs: Sequence[PDB], reason: str) -> str | None:
    """Why ``node`` may not be disrupted for ``reason`` by any voluntary method, or None.

    See the module docstring for the rules.
    """
    if node.nodepool not in pools:
        return f"nodepool {node.nodepool!r} not found"
    if not node.initialized:
        return "node is not initialized"
    for key in _REQUIRED_LABELS:
        if not node.labels.get(key):
            return f"node has no {key} label"
    if node.deleting:
        return "node is already being disrupted"
    if node.do_not_disrupt:
        return f"node has {L.DO_NOT_DISRUPT}"
    if reason == REASON_DRIFTED and node.termination_grace_period is not None:
        return None
    for pod in node.pods:
        if pod_blocks_disruption(pod):
            legacy = pod.annotations.get(L.DO_NOT_DISRUPT) != "true"
            return f"pod {pod.key} has {L.V1ALPHA5_DO_NOT_EVICT if legacy else L.DO_NOT_DISRUPT}"
        overlap = pdb_overlap_problem(pod, pdbs)
        if overlap is not None:
            return overlap
        pdb = blocking_pdb(pod, pdbs)
        if pdb is not None:
            return f"pdb {pdb.namespace}/{pdb.name} prevents pod evictions"
    return None


def utilization(node: Node) -> float:
    """Requested / allocatable of the node's pods (daemonsets included), the larger of cpu and memory."""
    used = node.view.requested()
    alloc = node.view.allocatable
    fractions = [used.get(r, 0) / alloc[r] for r in (CPU, MEMORY) if alloc.get(r)]
    return max(fractions, default=0.0)


def consolidation_problem(node: Node, pool: Pool, now: float, reason: str) -> str | None:
    """Why consolidation (emptiness for ``Empty``, under-utilization for ``Underutilized``) must leave ``node``."""
    if pool.static:
        return "static NodePool (spec.replicas): its node count is fixed, consolidation does not apply"
    if pool.consolidate_after is None:
        return "consolidateAfter is Never"
    quiet_since = node.last_pod_event if node.last_pod_event is not None else node.created
    if now - quiet_since < pool.consolidate_after:
        return f"consolidateAfter ({pool.consolidate_after:.0f}s) has not elapsed since the last pod event"
    if now - node.created < pool.min_node_lifetime:
        return f"node is younger than min-node-lifetime ({pool.min_node_lifetime:.0f}s)"
    if reason != REASON_UNDERUTILIZED:
        return None
    if pool.consolidation_policy not in ("WhenEmptyOrUnderutilized", "Balanced"):
        return f"consolidationPolicy is {pool.consolidation_policy}"
    target = pool.target_utilization
    if target is not None:
        used = utilization(node)
        if used >= target - pool.hysteresis:
            return (f"utilization {used:.2f} is not below target {target:.2f} minus hysteresis "
                    f"{pool.hysteresis:.2f}")
    return None


def eviction_cost(pod: Pod) -> float:
    """Karpenter's ``EvictionCost``: 1 + pod-deletion-cost/2^27 + priority/2^25, clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get(POD_DELETION_COST_ANNOTATION)
    if raw is not None:
        try:
            cost += float(raw) / 2**27
        except ValueError:
            pass
    cost += pod.priority / 2**25
    return max(-10.0, min(10.0, cost))


def lifetime_remaining(node: Node, now: float) -> float:
    """Fraction of ``expireAfter`` the node has left, in [0, 1] (1 when it never expires)."""
    if not node.expire_after:
        return 1.0
    return max(0.0, min(1.0, 1.0 - (now - node.created) / node.expire_after))


def disruption_cost(node: Node, now: float) -> float:
    """Sum of :func:`eviction_cost` over the node's pods, times :func:`lifetime_remaining`."""
    return sum(eviction_cost(p) for p in node.pods) * lifetime_remaining(node, now)


def by_disruption_cost(nodes: Iterable[Node], now: float) -> list[Node]:
    """Nodes sorted by ascending :func:`disruption_cost` (ties: higher price first, then name)."""
    return sorted(nodes, key=lambda n: (disruption_cost(n, now), -n.price, n.name))
