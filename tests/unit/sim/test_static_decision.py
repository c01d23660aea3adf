"""``simulate -f`` with a static NodePool (``FEATURE_GATES`` ``StaticCapacity=true``): its replicas exist before the
batch and pending pods land on them; with the gate off the pool is not managed."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.sim.decision import decide


@pytest.fixture(autouse=True)
def _static_capacity_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Static NodePools are managed only under Karpenter's StaticCapacity gate (off by default)."""
    monkeypatch.setenv("FEATURE_GATES", "StaticCapacity=true")

CLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "nodes", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}}


def _pool(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": ["m7i.xlarge"]},
                                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
                **spec}}


def _web(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}


def test_pending_pods_fill_the_static_nodes_then_a_dynamic_pool_launches_the_rest() -> None:
    out = decide([CLASS, _pool("fixed", replicas=2), _pool("dynamic"), _web(8)])
    # The two static NodeClaims (in flight) take 3 x 1 vCPU each on an m7i.xlarge (4 vCPU, 3.92 allocatable).
    assert [(e["node"].split("-")[0], len(e["pods"])) for e in out["existing"]] == [("fixed", 3), ("fixed", 3)]
    assert [(c["nodepool"], c["instance_type"], len(c["pods"])) for c in out["nodeclaims"]] == [
        ("dynamic", "m7i.xlarge", 2)]
    assert out["unschedulable"] == []


def test_a_static_pool_alone_never_launches_for_pods() -> None:
    out = decide([CLASS, _pool("fixed", replicas=1), _web(5)])
    assert out["nodeclaims"] == []
    assert [len(e["pods"]) for e in out["existing"]] == [3]
    assert len(out["unschedulable"]) == 2


def test_static_capacity_gate_off_leaves_the_static_pool_unmanaged(monkeypatch, caplog) -> None:
    """StaticCapacity=false (Karpenter's default): the static controller does not run, so the pool gets no replicas,
    and the provisioner still never launches for it (Karpenter filters static pools whatever the gate): the pods
    go to the dynamic pool, and the static pool gets one warning line."""
    monkeypatch.setenv("FEATURE_GATES", "StaticCapacity=false")
    out = decide([CLASS, _pool("fixed", replicas=2), _pool("dynamic"), _web(8)])
    assert out["existing"] == []
    assert {c["nodepool"] for c in out["nodeclaims"]} == {"dynamic"}
    assert sum(len(c["pods"]) for c in out["nodeclaims"]) == 8
    assert [r.getMessage() for r in caplog.records if "StaticCapacity" in r.getMessage()] == [
        "static nodepool fixed (spec.replicas 2) is not managed: the StaticCapacity feature gate is off "
        "(FEATURE_GATES StaticCapacity=true to keep its replicas)"]
