"""Issue 14's topology rules on every path: ``simulate -f`` (``decide``), a scenario replay's first batch and the
controller's provisioner read the same manifests and create identical NodeClaims.

- a preferred node affinity never narrows a spread's domains (aws/karpenter-provider-aws#4406);
- ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``: which NodePools count as spread domains;
- a volume's zone restricts the node, not the spread's domains (``minDomains`` still sees every zone);
- two self-affine pods whose own node requirements share no zone each open their own domain.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import labels as L

from .test_one_path import NODECLASS, _controller, _nodepool, _scenario_first_batch, _simulate_f

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]


def _pool(name: str, zones: list[str], **template: Any) -> dict[str, Any]:
    pool = _nodepool(name, [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
                            {"key": L.ZONE, "operator": "In", "values": zones},
                            {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    pool["spec"]["template"]["spec"].update(template)
    return pool


def _deployment(name: str, replicas: int, cpu: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"deployment": name}},
                     "template": {"metadata": {"labels": {**labels, "deployment": name}},
                                  "spec": {"containers": [{"name": "c", "resources": {
                                      "requests": {"cpu": cpu, "memory": "256Mi"}}}], **spec}}}}


def _spread(**extra: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": "web"}}, **extra}]


def _pods_per_zone(decision: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for plan in decision["nodeclaims"]:
        out[plan["zone"]] = out.get(plan["zone"], 0) + len(plan["pods"])
    return dict(sorted(out.items()))


def _same_on_every_path(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """``decide``'s answer, after checking that the three paths create the same NodeClaims."""
    decision, from_simulate = _simulate_f(docs)
    assert from_simulate, "the case must launch something"
    assert _scenario_first_batch(docs) == from_simulate
    assert _controller(docs) == from_simulate
    return decision


def test_preferred_zones_never_narrow_the_spread() -> None:
    """Six replicas spread over three zones and prefer us-east-1a/b: the preference is tried first, yet
    us-east-1c counts for the minimum, so each zone gets two (not three and three in a and b)."""
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [
            {"key": L.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]}}]}}
    docs = [NODECLASS, _pool("spread", ZONES),
            _deployment("web", 6, "500m", {"app": "web"}, affinity=prefer, topologySpreadConstraints=_spread())]
    decision = _same_on_every_path(docs)
    assert decision["unschedulable"] == []
    assert _pods_per_zone(decision) == {"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2}


@pytest.mark.parametrize(("policy", "per_zone", "pending"), [
    ("Honor", {"us-east-1a": 3}, 0),   # pool "right" is outside the pods' nodeSelector: its zone does not count
    ("Ignore", {"us-east-1a": 1}, 2),  # us-east-1b counts as an empty domain: one pod, then maxSkew 1
])
def test_node_affinity_policy_decides_which_pools_count(policy: str, per_zone: dict[str, int], pending: int) -> None:
    """Honor follows kube-scheduler, which counts only nodes matching the pod's nodeSelector, so it binds all
    three pods in us-east-1a. Karpenter would count pool "right"'s zone under Honor too (its domain groups do
    not look at node affinity on other keys) and leave two pods pending that kube-scheduler would place."""
    docs = [NODECLASS, _pool("left", ["us-east-1a"]), _pool("right", ["us-east-1b"]),
            _deployment("web", 3, "500m", {"app": "web"}, nodeSelector={"pool": "left"},
                        topologySpreadConstraints=_spread(nodeAffinityPolicy=policy))]
    decision = _same_on_every_path(docs)
    assert _pods_per_zone(decision) == per_zone and len(decision["unschedulable"]) == pending


@pytest.mark.parametrize(("policy", "per_zone", "pending"), [
    ("Honor", {"us-east-1a": 3}, 0),   # the pods do not tolerate pool "tainted": its zone does not count
    ("Ignore", {"us-east-1a": 1}, 2),  # default: us-east-1b counts although no pod could go there
])
def test_node_taints_policy_decides_which_pools_count(policy: str, per_zone: dict[str, int], pending: int) -> None:
    taint = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    docs = [NODECLASS, _pool("open", ["us-east-1a"]), _pool("tainted", ["us-east-1b"], taints=taint),
            _deployment("web", 3, "500m", {"app": "web"}, topologySpreadConstraints=_spread(nodeTaintsPolicy=policy))]
    decision = _same_on_every_path(docs)
    assert _pods_per_zone(decision) == per_zone and len(decision["unschedulable"]) == pending


def test_volume_zone_with_min_domains_sees_every_zone() -> None:
    """Three replicas spread over the three zones (``minDomains: 3``); a fourth pod of the same app mounts a
    volume whose StorageClass allows only us-east-1a. The spread's minimum runs over all three zones (1), so
    us-east-1a may take a second pod (skew 1). Counting only the volume's zone would make one domain < minDomains,
    a minimum of 0 and a skew of 2: the pod would stay pending."""
    storage = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3-a"},
               "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
               "allowedTopologies": [{"matchLabelExpressions": [{"key": L.ZONE, "values": ["us-east-1a"]}]}]}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
             "spec": {"storageClassName": "gp3-a", "accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "10Gi"}}}}
    spread = _spread(minDomains=3)
    docs = [NODECLASS, _pool("spread", ZONES), storage, claim,
            _deployment("web", 3, "1", {"app": "web"}, topologySpreadConstraints=spread),
            _deployment("db", 1, "500m", {"app": "web"}, topologySpreadConstraints=spread,
                        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])]
    decision = _same_on_every_path(docs)
    assert decision["unschedulable"] == []
    assert _pods_per_zone(decision) == {"us-east-1a": 2, "us-east-1b": 1, "us-east-1c": 1}
    (db_zone,) = [plan["zone"] for plan in decision["nodeclaims"] if any("db-" in p for p in plan["pods"])]
    assert db_zone == "us-east-1a"


def test_self_affine_pods_in_disjoint_zones_open_their_own_domains() -> None:
    """Two workloads select each other with a zonal pod affinity, one required in us-east-1b, the other in
    us-east-1c: no selected pod sits in a zone the second can reach, so it opens its own, as Karpenter does."""
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": L.ZONE, "labelSelector": {"matchLabels": {"security": "s1"}}}]}}

    def pinned(name: str, zone: str) -> dict[str, Any]:
        return _deployment(name, 1, "500m", {"security": "s1"}, affinity=affinity, nodeSelector={L.ZONE: zone})

    docs = [NODECLASS, _pool("spread", ZONES), pinned("one", "us-east-1b"), pinned("two", "us-east-1c")]
    decision = _same_on_every_path(docs)
    assert decision["unschedulable"] == []
    zones = {p.split("/")[1].split("-")[0]: plan["zone"] for plan in decision["nodeclaims"] for p in plan["pods"]}
    assert zones == {"one": "us-east-1b", "two": "us-east-1c"}
