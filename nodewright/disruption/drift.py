"""Drift: NodeClaims that no longer match their NodePool or EC2NodeClass are replaced.

Drift reasons (Karpenter v1 ``nodeclaim/disruption/drift.go`` and the AWS provider's ``IsDrifted``):

* ``NodePoolDrifted``: the claim's ``karpenter.sh/nodepool-hash`` differs from the pool's current
  :func:`~nodewright.api.hashing.nodepool_hash` and both carry the same hash version;
* ``RequirementsDrifted``: the node's labels no longer satisfy the pool's requirements (a label the node does
  not carry is ignored when it is a well-known label, as Karpenter's ``AllowUndefinedWellKnownLabels``);
* ``NodeClassDrift``: ``karpenter.k8s.aws/ec2nodeclass-hash`` differs from the EC2NodeClass's (same version);
* ``AMIDrift``: the instance's image is not among the AMIs the EC2NodeClass resolves now;
* ``SubnetDrift``: its subnet (or, when the subnet is unknown, its zone) is no longer selected;
* ``SecurityGroupDrift``: its security groups differ from those selected;
* any reason the cloud provider reported (:attr:`Node.cloud_drift`).

Execution (Karpenter's drift method): empty drifted candidates are deleted together within the ``Drifted``
budgets; otherwise one drifted candidate is replaced: its pods are simulated on the other nodes plus as many
new NodeClaims as needed, which are launched and Ready before the old node drains. Drift does not wait for
``consolidateAfter`` nor the min-node-lifetime churn guard (those only gate consolidation).

**Terminate-first** (capacity-constrained NodePools, Karpenter v1.15; kubernetes-sigs/karpenter RFC
``designs/terminate-first-disruption.md``, PR #3203, and its implementation PR #3312 -- neither is in main of
2026-08-20, so this follows the RFC): when the candidate's pods fit nowhere else, replace-first would block drift
forever, so the candidate is deleted first (budgets and PDBs still gate it and its drain) and its pods wait for the
capacity it frees, when

* its pool is static (``spec.replicas``): the pool is at its replica count and cannot grow, the static controller
  launches the successor once the node is gone (only under the ``StaticCapacity`` gate,
  :attr:`ClusterView.static_capacity`: with it off nothing would); or
* it runs in a capacity reservation and the pods fit once its slot is credited back to that reservation (the
  simulation is re-run with one more instance in it): the only place for its replacement is the reservation it
  holds, so the provisioner launches there when the node is gone.

Otherwise (some other capacity takes the pods, on-demand included) drift replaces first, as before. The decision
has no replacements and ``terminate_first`` set; validation re-checks the same condition.
"""

from __future__ import annotations

import dataclasses

from nodewright.api import labels as L
from nodewright.api.hashing import EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION
from nodewright.cloud.instancetype import CAPACITY_TYPE_RESERVED, InstanceType, Offering
from nodewright.cloud.reservations import reserved_price
from nodewright.disruption.budgets import budget_mapping, within_budget
from nodewright.disruption.candidates import base_problem, by_disruption_cost
from nodewright.disruption.model import (
    DRIFT,
    REASON_DRIFTED,
    ClusterView,
    Decision,
    Node,
    NodeClassInfo,
    Pool,
)
from nodewright.disruption.simulation import Simulator
from nodewright.scheduling.cache import SchedulingCache

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
NODECLASS_DRIFTED = "NodeClassDrift"
AMI_DRIFTED = "AMIDrift"
SUBNET_DRIFTED = "SubnetDrift"
SECURITY_GROUP_DRIFTED = "SecurityGroupDrift"


def _stamped(node: Node, key: str, version_key: str, version: str) -> str | None:
    """The claim's hash when stamped with ``version`` (another version is re-stamped, never drifted)."""
    value = node.annotations.get(key)
    if not value or node.annotations.get(version_key) != version:
        return None
    return value


def requirements_drifted(node: Node, pool: Pool) -> bool:
    """Whether the node's labels violate the pool's requirements (undefined well-known labels allowed)."""
    for key, req in pool.spec.requirements.items():
        value = node.labels.get(key)
        if value is None:
            if key in L.WELL_KNOWN_LABELS or req.allows_absence():
                continue
            return True
        if not req.has(value):
            return True
    return False


def nodeclass_drift(node: Node, nodeclass: NodeClassInfo) -> str | None:
    """EC2NodeClass drift reason of ``node`` (hash, AMI, subnet, security groups), or None."""
    stamped = _stamped(node, L.EC2NODECLASS_HASH, L.EC2NODECLASS_HASH_VERSION, EC2NODECLASS_HASH_VERSION)
    if stamped is not None and nodeclass.hash and stamped != nodeclass.hash:
        return NODECLASS_DRIFTED
    if node.image_id and nodeclass.ami_ids is not None and node.image_id not in nodeclass.ami_ids:
        return AMI_DRIFTED
    if node.subnet_id and nodeclass.subnet_ids is not None:
        if node.subnet_id not in nodeclass.subnet_ids:
            return SUBNET_DRIFTED
    elif node.zone and nodeclass.subnet_zones is not None and node.zone not in nodeclass.subnet_zones:
        return SUBNET_DRIFTED
    if node.security_group_ids is not None and nodeclass.security_group_ids is not None:
        if node.security_group_ids != nodeclass.security_group_ids:
            return SECURITY_GROUP_DRIFTED
    return None


def drift_reason(node: Node, view: ClusterView) -> str | None:
    """Why ``node`` is drifted (see module docstring), or None."""
    pool = view.pools.get(node.nodepool)
    if pool is None:
        return None
    stamped = _stamped(node, L.NODEPOOL_HASH, L.NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION)
    if stamped is not None and pool.hash and stamped != pool.hash:
        return NODEPOOL_DRIFTED
    if requirements_drifted(node, pool):
        return REQUIREMENTS_DRIFTED
    nodeclass = view.nodeclasses.get(node.nodeclass)
    if nodeclass is not None:
        reason = nodeclass_drift(node, nodeclass)
        if reason is not None:
            return reason
    return node.cloud_drift


def drifted_candidates(view: ClusterView, now: float) -> list[tuple[Node, str]]:
    """(node, drift reason) of drifted nodes that pass the candidate rules for ``Drifted``, by disruption cost."""
    out = []
    for node in by_disruption_cost(view.nodes, now):
        reason = drift_reason(node, view)
        if reason is not None and base_problem(node, view.pools, view.pdbs, REASON_DRIFTED) is None:
            out.append((node, reason))
    return out


def drift(view: ClusterView, now: float, simulator: Simulator, max_simulations: int = 10) -> Decision | None:
    """The drift decision of this pass (see module docstring), or None.

    Args:
        max_simulations: at most this many candidates are simulated in one pass (the rest wait for the next).
    """
    found = drifted_candidates(view, now)
    if not found:
        return None
    reasons = dict((n.name, r) for n, r in found)
    allowed = budget_mapping(view.pools, view.nodes, REASON_DRIFTED, now)
    nodes = within_budget([n for n, _ in found], allowed)
    empty = [n for n in nodes if not n.pods]
    if empty:
        return Decision(DRIFT, REASON_DRIFTED, empty, evaluated=len(found),
                        detail={n.name: reasons[n.name] for n in empty})
    for node in nodes[:max_simulations]:
        result = simulator.simulate([node], max_new=None)
        if result.unschedulable:
            why = terminate_first(node, view)
            if why is not None:
                return Decision(DRIFT, REASON_DRIFTED, [node], evaluated=len(found), terminate_first=True,
                                detail={node.name: f"{reasons[node.name]}, terminate-first: {why}"})
            continue
        return Decision(DRIFT, REASON_DRIFTED, [node], replacements=list(result.new_nodeclaims), result=result,
                        evaluated=len(found), detail={node.name: reasons[node.name]})
    return None


def credited_reservation(node: Node, view: ClusterView) -> dict[str, list[InstanceType]] | None:
    """The non-static pools' instance types with ``node``'s reservation slot given back (one more instance in the
    ``reserved`` offering of its reservation, created at Karpenter's reserved price when the full reservation has
    none), or None when ``node`` is not in a reservation or no pool offers its type."""
    reservation = node.view.labels.get(L.CAPACITY_RESERVATION_ID, "")
    if not reservation or node.view.labels.get(L.CAPACITY_TYPE) != CAPACITY_TYPE_RESERVED:
        return None
    type_name, zone = node.view.labels.get(L.INSTANCE_TYPE, ""), node.view.labels.get(L.ZONE, "")
    out: dict[str, list[InstanceType]] = {}
    credited = False
    for pool in view.pools.values():
        if pool.static:
            continue
        types = []
        for it in pool.instance_types:
            if it.name == type_name:
                more = _with_one_more(it, reservation, zone)
                credited = credited or more is not it
                it = more
            types.append(it)
        out[pool.name] = types
    return out if credited else None


def _with_one_more(it: InstanceType, reservation: str, zone: str) -> InstanceType:
    """``it`` with one more instance in ``reservation`` (``it`` itself when it has no price in ``zone``)."""
    offerings = list(it.offerings)
    for i, o in enumerate(offerings):
        if o.reservation_id == reservation:
            offerings[i] = dataclasses.replace(o, available=True, reservation_capacity=o.reservation_capacity + 1)
            return dataclasses.replace(it, offerings=tuple(offerings))
    price = reserved_price(it, zone)
    if price is None:
        return it
    zone_id = next((o.zone_id for o in offerings if o.zone == zone), "")
    offerings.append(Offering(zone, CAPACITY_TYPE_RESERVED, price, zone_id=zone_id, reservation_id=reservation,
                              reservation_capacity=1))
    return dataclasses.replace(it, offerings=tuple(offerings))


def terminate_first(node: Node, view: ClusterView) -> str | None:
    """Why drifted ``node``, whose pods fit nowhere now, is deleted before its replacement exists (see module
    docstring), or None (drift waits)."""
    pool = view.pools.get(node.nodepool)
    if pool is not None and pool.static:
        return ("static NodePool at its replicas, the successor launches once the node is gone"
                if view.static_capacity else None)
    types = credited_reservation(node, view)
    if types is None:
        return None
    simulator = Simulator(view, cache=SchedulingCache())  # its own cache: the credited types are one-off
    simulator.instance_types = types
    if simulator.simulate([node], max_new=None).unschedulable:
        return None
    reservation = node.view.labels.get(L.CAPACITY_RESERVATION_ID, "")
    return f"its pods fit only in the slot it frees in capacity reservation {reservation}"


def validate_drift(decision: Decision, nodes: list[Node], view: ClusterView) -> Decision | None:
    """Drift re-checked on a fresh view: every candidate still drifted, and its pods still fit (re-simulated)."""
    if any(drift_reason(n, view) is None for n in nodes):
        return None
    if decision.terminate_first:
        if any(terminate_first(n, view) is None for n in nodes):
            return None
        return dataclasses.replace(decision, candidates=nodes)
    result = Simulator(view).simulate(nodes, max_new=None) if any(n.pods for n in nodes) else None
    if result is not None and result.unschedulable:
        return None
    return Decision(DRIFT, decision.reason, nodes, replacements=list(result.new_nodeclaims) if result else [],
                    result=result, evaluated=decision.evaluated, detail=decision.detail)
