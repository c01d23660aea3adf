"""CSI volume attach limits (a node's CSINode ``allocatable.count`` per driver) on every path: ``simulate -f``
(:func:`nodewright.sim.decision.decide`), the controller's provisioner with the simulated kube-scheduler, and
scenario replay, where the simulated kubelet's node gets its CSINode from the scenario."""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api import labels as L
from nodewright.sim.kubelet import node_name_for
from nodewright.sim.runner import run
from nodewright.sim.scenario import parse_scenario

from .test_one_path import NODECLASS, REGION, _controller, _node, _nodepool, _simulate_f

EBS = "ebs.csi.aws.com"
POOL = _nodepool("capped", [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge"]},
                            {"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]},
                            {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
STORAGE = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
           "provisioner": EBS, "volumeBindingMode": "WaitForFirstConsumer"}


def _csinode(node: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": node},
            "spec": {"drivers": [{"name": EBS, "nodeID": f"id-{node}", "allocatable": {"count": count}}]}}


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "10Gi"}}}}


def _pod(name: str, claim: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeSelector": {"pool": "capped"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}], **spec}}


def _existing(limit: int | None) -> list[dict[str, Any]]:
    """A Ready m5.xlarge holding one pod with one EBS claim, and three pending pods with a claim each."""
    docs = [NODECLASS, POOL, STORAGE, _node("owned", "capped"), *[_claim(f"data-{i}") for i in range(4)],
            _pod("bound", "data-0", nodeName="owned"), *[_pod(f"p{i}", f"data-{i}") for i in range(1, 4)]]
    return docs + ([_csinode("owned", limit)] if limit is not None else [])


def test_a_node_takes_pods_only_up_to_its_volume_limit_in_simulate_and_the_controller() -> None:
    # Two attachable EBS volumes: the node takes one more claim; the other two pods need a new node.
    decision, claims = _simulate_f(_existing(2))
    (plan,) = decision["nodeclaims"]
    assert plan["pods"] == ["default/p2", "default/p3"] and plan["instance_type"] == "m5.xlarge"
    assert decision["existing"] == [{"node": "owned", "pods": ["default/p1"]}] and decision["unschedulable"] == []
    assert len(claims) == 1 and claims == _controller(_existing(2))


def test_without_a_csinode_the_node_takes_every_pod() -> None:
    decision, claims = _simulate_f(_existing(None))
    assert decision["nodeclaims"] == [] and claims == []
    assert _controller(_existing(None)) == []


def _scenario(limit: int | None) -> dict[str, Any]:
    manifests = [NODECLASS, POOL, STORAGE, *[_claim(f"data-{i}") for i in range(3)],
                 *[_pod(f"p{i}", f"data-{i}") for i in range(3)]]
    if limit is not None:
        # The EBS CSI node plugin's CSINode for the first node the simulated kubelet registers.
        manifests.append(_csinode(node_name_for(5, REGION), limit))
    return {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "volume-limits"},
            "spec": {"duration": "10m", "region": REGION, "zones": ["us-east-1a"], "seed": 1,
                     "launchLatency": {"p50": "30s", "p90": "30s"}, "podStartDelay": "5s",
                     "manifests": copy.deepcopy(manifests), "events": []}}


def test_scenario_replay_launches_a_second_node_past_the_volume_limit() -> None:
    # The first NodeClaim is planned for all three pods (a new node's limit is unknown, as in Karpenter); its
    # node registers with room for two volumes, so the third pod gets a second node.
    summary = run(parse_scenario(_scenario(2))).summary
    assert summary["nodes_launched"] == 2 and summary["unscheduled_pods_at_end"] == 0
    assert summary["pods_scheduled"] == 3


def test_scenario_replay_without_a_csinode_uses_one_node() -> None:
    summary = run(parse_scenario(_scenario(None))).summary
    assert summary["nodes_launched"] == 1 and summary["unscheduled_pods_at_end"] == 0
