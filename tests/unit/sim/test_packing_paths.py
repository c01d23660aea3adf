"""Issue 14, a packing defect found by the conformance work: in a NodePool of c6g (arm64) types, a plain 1-vCPU
pod next to a 2-vCPU pod pinned to us-east-1a shares the c6g.xlarge the pinned pod needs, instead of opening a
c6g.large of its own. ``simulate -f``, a scenario replay's first batch and the controller's provisioner create
the same NodeClaims.

Prices are the bundled us-east-1 on-demand catalog: c6g.large $0.068/h, c6g.xlarge $0.136/h. A c6g.large has
1930m allocatable (two 1-vCPU pods do not fit), a c6g.xlarge 3920m (the 2-vCPU pod and one 1-vCPU pod fit, not
two). Before the fix the pinned pod got a c6g.xlarge alone and the two plain pods a second one: $0.272/h.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.sim.decision import decide

from .test_one_path import NODECLASS, _controller, _nodepool, _scenario_first_batch, _simulate_f

GRAVITON = [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["c6g"]},
            {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
PINNED = {
    "selector": {"nodeSelector": {L.ZONE: "us-east-1a"}},
    "affinity": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]}]}]}}}},
}


def _pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec}}


def _zone_values(claim: dict[str, Any]) -> list[str] | None:
    return next((r["values"] for r in claim["spec"]["requirements"] if r["key"] == L.ZONE), None)


@pytest.mark.parametrize("how", sorted(PINNED))
def test_plain_pod_shares_the_zone_pinned_pods_c6g_xlarge(how: str) -> None:
    docs = [NODECLASS, _nodepool("arm", GRAVITON), _pod("pinned", "2", **PINNED[how]), _pod("plain-0", "1"),
            _pod("plain-1", "1")]
    decision, claims = _simulate_f(docs)
    layout = [(p["instance_type"], p["zone"], p["pods"], p["price_per_hour"]) for p in decision["nodeclaims"]]
    assert layout == [("c6g.xlarge", "us-east-1a", ["default/pinned", "default/plain-0"], 0.136),
                      ("c6g.large", "us-east-1a", ["default/plain-1"], 0.068)]  # $0.204/h, was $0.272/h
    assert decision["unschedulable"] == []
    # The pinned pod's NodeClaim keeps its zone requirement; the lone plain pod's may launch in any zone.
    by_type = {c["labels"][L.INSTANCE_TYPE]: c for c in claims}
    assert _zone_values(by_type["c6g.xlarge"]) == ["us-east-1a"]
    assert _zone_values(by_type["c6g.large"]) is None
    assert _scenario_first_batch(docs) == claims
    assert _controller(docs) == claims



def test_pinned_by_another_label_shares_too() -> None:
    """The same with the 2-vCPU pod pinned by ``kubernetes.io/arch: arm64`` and ``karpenter.sh/capacity-type:
    on-demand`` instead of a zone (labels every node of this pool has, but a requirement set of its own)."""
    pinned = _pod("pinned", "2", nodeSelector={L.ARCH: "arm64", L.CAPACITY_TYPE: "on-demand"})
    decision = decide([NODECLASS, _nodepool("arm", GRAVITON), pinned, _pod("plain-0", "1"), _pod("plain-1", "1")])
    layout = sorted((p["instance_type"], len(p["pods"]), p["price_per_hour"]) for p in decision["nodeclaims"])
    assert layout == [("c6g.large", 1, 0.068), ("c6g.xlarge", 2, 0.136)]
    assert "default/pinned" in next(p["pods"] for p in decision["nodeclaims"] if p["instance_type"] == "c6g.xlarge")
