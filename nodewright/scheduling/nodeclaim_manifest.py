"""The NodeClaim manifest a :class:`~nodewright.scheduling.result.NodeClaimPlan` becomes.

Karpenter's ``NodeClaimTemplate.ToNodeClaim``: the provisioner creates it for each new NodeClaim it decides, and
the disruption controller for each replacement it launches; both import it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodewright.api import labels as L
from nodewright.api.hashing import nodepool_hash_annotations
from nodewright.quantities import format_resource_list
from nodewright.scheduling.result import NodeClaimPlan


def nodeclaim_from_plan(plan: NodeClaimPlan, nodepool: Mapping[str, Any]) -> dict[str, Any]:
    """The NodeClaim manifest for a scheduler plan (Karpenter's ``NodeClaimTemplate.ToNodeClaim``).

    Named ``<nodepool>-<random>``; labels from the template plus ``karpenter.sh/nodepool``; requirements from
    the plan (candidate instance types included); the template's taints, startup taints, nodeClassRef,
    expireAfter and terminationGracePeriod; owned by the NodePool; carries the termination finalizer and, as every
    NodeClaim Karpenter's provisioner creates, ``karpenter.sh/nodeclaim-min-values-relaxed`` ("true" when
    ``MinValuesPolicy=BestEffort`` relaxed a ``minValues``).
    """
    template = (nodepool.get("spec") or {}).get("template") or {}
    tspec = template.get("spec") or {}
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), **plan.labels, L.NODEPOOL: plan.nodepool}
    labels.pop(L.HOSTNAME, None)
    node_class_ref = tspec.get("nodeClassRef") or {"group": L.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"}
    if node_class_ref.get("kind") == "EC2NodeClass":
        labels[L.EC2NODECLASS] = str(node_class_ref.get("name"))
    spec: dict[str, Any] = {
        "requirements": plan.requirements.to_dicts(),
        "nodeClassRef": dict(node_class_ref),
        "resources": {"requests": format_resource_list(plan.requests)},
    }
    if plan.taints:
        spec["taints"] = [t.to_dict() for t in plan.taints]
    if plan.startup_taints:
        spec["startupTaints"] = [t.to_dict() for t in plan.startup_taints]
    for key in ("expireAfter", "terminationGracePeriod"):
        if tspec.get(key) is not None:
            spec[key] = tspec[key]
    metadata: dict[str, Any] = {
        "generateName": f"{plan.nodepool}-",
        "labels": labels,
        # Drift compares this stamp with the pool's current hash (nodewright.disruption.drift).
        "annotations": {**dict(tmeta.get("annotations") or {}), **nodepool_hash_annotations(nodepool),
                        L.NODECLAIM_MIN_VALUES_RELAXED: "true" if plan.min_values_relaxed else "false"},
        "finalizers": [L.TERMINATION_FINALIZER],
    }
    np_meta = nodepool.get("metadata") or {}
    if np_meta.get("uid"):
        metadata["ownerReferences"] = [{"apiVersion": L.API_VERSION, "kind": "NodePool", "name": np_meta.get("name"),
                                        "uid": np_meta["uid"], "blockOwnerDeletion": True}]
    return {"apiVersion": L.API_VERSION, "kind": "NodeClaim", "metadata": metadata, "spec": spec}
