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
"""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.api.hashing import EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION
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
            continue
        return Decision(DRIFT, REASON_DRIFTED, [node], replacements=list(result.new_nodeclaims), result=result,
                        evaluated=len(found), detail={node.name: reasons[node.name]})
    return None


def validate_drift(decision: Decision, nodes: list[Node], view: ClusterView) -> Decision | None:
    """Drift re-checked on a fresh view: every candidate still drifted, and its pods still fit (re-simulated)."""
    if any(drift_reason(n, view) is None for n in nodes):
        return None
    result = Simulator(view).simulate(nodes, max_new=None) if any(n.pods for n in nodes) else None
    if result is not None and result.unschedulable:
        return None
    return Decision(DRIFT, decision.reason, nodes, replacements=list(result.new_nodeclaims) if result else [],
                    result=result, evaluated=decision.evaluated, detail=decision.detail)
