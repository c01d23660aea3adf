"""Drift: each hash input, hash versions, requirements, EC2NodeClass hash/AMI/subnet/security groups, execution."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.api.hashing import nodepool_hash
from nodewright.api.manifests import parse_nodepool
from nodewright.disruption import decide, drift_reason
from nodewright.disruption.decide import validate
from nodewright.disruption.drift import nodeclass_drift
from nodewright.disruption.model import NodeClassInfo
from nodewright.scheduling import Requirement, Requirements

from .helpers import MEDIUM, NOW, cluster, node, pod, pool

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
    "spec": {"template": {"metadata": {"labels": {"team": "web"}, "annotations": {"a": "1"}}, "spec": {
        "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}],
        "expireAfter": "720h"}},
        "limits": {"cpu": "100"}, "weight": 10},
}
NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}


def changed(path: list[str], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(NODEPOOL)
    target = doc
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return doc


T = ["spec", "template"]
TS = ["spec", "template", "spec"]


@pytest.mark.parametrize(("path", "value"), [
    (T + ["metadata", "labels"], {"team": "api"}),
    (T + ["metadata", "annotations"], {"a": "2"}),
    (TS + ["taints"], [{"key": "a", "effect": "NoExecute"}]),
    (TS + ["startupTaints"], [{"key": "s", "effect": "NoSchedule"}]),
    (TS + ["nodeClassRef"], {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "other"}),
    (TS + ["expireAfter"], "24h"),
    (TS + ["terminationGracePeriod"], "1h"),
])
def test_each_template_input_changes_the_nodepool_hash(path: list[str], value: Any) -> None:
    assert nodepool_hash(changed(path, value)) != nodepool_hash(NODEPOOL)


@pytest.mark.parametrize(("path", "value"), [
    (["spec", "weight"], 50),
    (["spec", "limits"], {"cpu": "5"}),
    (["spec", "disruption"], {"consolidateAfter": "1h"}),
    (TS + ["requirements"], [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]),
    (TS + ["taints"], [{"key": "b", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]),
])
def test_weight_limits_disruption_requirements_and_taint_order_do_not(path: list[str], value: Any) -> None:
    assert nodepool_hash(changed(path, value)) == nodepool_hash(NODEPOOL)


def test_hash_is_the_same_for_the_dict_and_the_model_and_is_16_hex() -> None:
    h = nodepool_hash(NODEPOOL)
    assert h == nodepool_hash(parse_nodepool(copy.deepcopy(NODEPOOL)))
    assert len(h) == 16 and int(h, 16) >= 0


def test_nodepool_hash_drift_only_with_the_same_hash_version() -> None:
    view = cluster([], [pool(hash="new")])
    assert drift_reason(node("n", hash="old"), view) == "NodePoolDrifted"
    assert drift_reason(node("n", hash="new"), view) is None
    other_version = node("n", hash=None, annotations={L.NODEPOOL_HASH: "old", L.NODEPOOL_HASH_VERSION: "v3"})
    assert drift_reason(other_version, view) is None
    assert drift_reason(node("n", hash=None), view) is None


def test_requirements_drift_when_labels_no_longer_satisfy_them_not_when_widened() -> None:
    p = pool()
    view = cluster([], [p])
    n = node("n", capacity_type="on-demand")
    p.spec.requirements = Requirements([Requirement(L.CAPACITY_TYPE, False, ("on-demand", "spot"))])
    assert drift_reason(n, view) is None
    p.spec.requirements = Requirements([Requirement(L.CAPACITY_TYPE, False, ("spot",))])
    assert drift_reason(n, view) == "RequirementsDrifted"
    # A well-known label the node lacks is not drift; a custom one it must have is.
    p.spec.requirements = Requirements([Requirement(L.INSTANCE_GENERATION, False, ("5",))])
    assert drift_reason(n, view) is None
    p.spec.requirements = Requirements([Requirement("team", False, ("web",))])
    assert drift_reason(n, view) == "RequirementsDrifted"


def test_nodeclass_hash_ami_subnet_and_security_group_drift() -> None:
    stamped = {L.EC2NODECLASS_HASH: "abc", L.EC2NODECLASS_HASH_VERSION: "v1"}
    info = NodeClassInfo("default", hash="abc", ami_ids=frozenset({"ami-1"}), subnet_ids=frozenset({"subnet-1"}),
                         subnet_zones=frozenset({"us-east-1a"}), security_group_ids=frozenset({"sg-1"}))
    ok = node("n", annotations=stamped, image_id="ami-1", subnet_id="subnet-1", security_group_ids=frozenset({"sg-1"}))
    assert nodeclass_drift(ok, info) is None
    assert nodeclass_drift(ok, NodeClassInfo("default", hash="def")) == "NodeClassDrift"
    assert nodeclass_drift(node("n", image_id="ami-2"), info) == "AMIDrift"
    assert nodeclass_drift(node("n", subnet_id="subnet-9"), info) == "SubnetDrift"
    assert nodeclass_drift(node("n", zone="us-east-1c"), info) == "SubnetDrift"
    assert nodeclass_drift(node("n", security_group_ids=frozenset({"sg-1", "sg-2"})), info) == "SecurityGroupDrift"
    view = cluster([], nodeclasses={"default": info})
    assert drift_reason(node("n", nodeclass="default", image_id="ami-2"), view) == "AMIDrift"
    assert drift_reason(node("n", cloud_drift="SecurityGroupDrift"), view) == "SecurityGroupDrift"


def test_drift_replaces_a_busy_node_with_a_ready_replacement_and_deletes_empty_ones_together() -> None:
    # n0 drifted with 3 cpu of pods: the other node (c.medium, 4 cpu, 3.5 used) cannot take them.
    busy = node("n0", hash="old", pods=[pod("a-0", 1500), pod("a-1", 1500)])
    other = node("n1", pods=[pod("b-0", 3500)], hash="new")
    d = decide(cluster([busy, other], [pool(hash="new")]), NOW)
    assert d is not None and d.method == "drift" and d.reason == "Drifted"
    assert [c.name for c in d.candidates] == ["n0"] and d.decision == "replace"
    assert [p.instance_type.name for p in d.replacements] == ["c.medium"]
    assert sorted(p.key for p in d.replacements[0].pods) == ["default/a-0", "default/a-1"]
    assert d.detail == {"n0": "NodePoolDrifted"}
    # consolidateAfter: Never keeps emptiness away; drift does not wait for it.
    empties = [node(f"e{i}", hash="old") for i in range(3)]
    d = decide(cluster([*empties, other], [pool(hash="new", consolidate_after=None)]), NOW)
    assert d is not None and d.method == "drift" and d.decision == "delete"
    assert sorted(c.name for c in d.candidates) == ["e0", "e1", "e2"]
    assert d.message() == "Deleting 3 nodes (NodePoolDrifted)"


# --- terminate-first drift (capacity-constrained NodePools, Karpenter v1.15 RFC terminate-first-disruption) ---

def _reserved(name: str, pods: list) -> Any:
    n = node(name, hash="old", capacity_type="reserved", price=0.0, pods=pods)
    n.view.labels[L.CAPACITY_RESERVATION_ID] = "cr-0123456789abcdef0"
    return n


def test_drift_terminates_first_when_the_pods_fit_only_in_the_reservation_slot_it_frees() -> None:
    """A reserved-only pool whose reservation is full (no reserved offering left): n0's 3 cpu of pods fit nowhere,
    so replace-first would wait forever; with n0's slot credited back they fit there, so drift deletes n0 first."""
    busy = _reserved("n0", [pod("a-0", 1500), pod("a-1", 1500)])
    other = node("n1", pods=[pod("b-0", 3500)], hash="new", capacity_type="reserved", price=0.0)
    view = cluster([busy, other], [pool(hash="new", capacity_types=("reserved",))])
    d = decide(view, NOW)
    assert d is not None and d.method == "drift" and d.terminate_first
    assert [c.name for c in d.candidates] == ["n0"] and d.decision == "delete" and d.replacements == []
    assert d.detail == {"n0": "NodePoolDrifted, terminate-first: its pods fit only in the slot it frees in "
                              "capacity reservation cr-0123456789abcdef0"}
    fresh = validate(d, view, NOW)
    assert fresh is not None and fresh.terminate_first and [c.name for c in fresh.candidates] == ["n0"]


def test_drift_still_replaces_first_when_other_capacity_takes_the_pods() -> None:
    busy = _reserved("n0", [pod("a-0", 1500), pod("a-1", 1500)])
    other = node("n1", pods=[pod("b-0", 3500)], hash="new")
    d = decide(cluster([busy, other], [pool(hash="new", capacity_types=("reserved", "on-demand"))]), NOW)
    assert d is not None and not d.terminate_first and d.decision == "replace"
    assert [(p.instance_type.name, p.capacity_type) for p in d.replacements] == [("c.medium", "on-demand")]


def test_drift_waits_when_not_even_the_freed_slot_takes_the_pods() -> None:
    busy = _reserved("n0", [pod("a-0", 4500)])  # more than the reserved type (c.medium, 4 cpu) has
    other = node("n1", pods=[pod("b-0", 3500)], hash="new", capacity_type="reserved", price=0.0)
    pools = [dataclasses.replace(pool(hash="new", capacity_types=("reserved",)), instance_types=[MEDIUM])]
    assert decide(cluster([busy, other], pools), NOW) is None


def test_drift_of_a_static_pool_terminates_first() -> None:
    """A static pool (spec.replicas) never grows for a replacement: its drifted node, whose pods fit nowhere
    else, is deleted first and the static controller launches the successor."""
    busy = node("n0", hash="old", pods=[pod("a-0", 1500), pod("a-1", 1500)])
    other = node("n1", pods=[pod("b-0", 3500)], hash="new")
    static = dataclasses.replace(pool(hash="new"), static=True)
    d = decide(cluster([busy, other], [static]), NOW)
    assert d is not None and d.terminate_first and d.decision == "delete"
    assert d.detail["n0"].endswith("terminate-first: static NodePool at its replicas, the successor launches once "
                                   "the node is gone")


def test_static_drift_waits_when_the_static_capacity_gate_is_off() -> None:
    """StaticCapacity off: the static controller does not run, so nothing would replace the node: drift waits."""
    busy = node("n0", hash="old", pods=[pod("a-0", 1500), pod("a-1", 1500)])
    other = node("n1", pods=[pod("b-0", 3500)], hash="new")
    static = dataclasses.replace(pool(hash="new"), static=True)
    assert decide(cluster([busy, other], [static], static_capacity=False), NOW) is None
