"""NodePool status controller: ``karpenter_pods_state`` follows the pods pass by pass (series added and removed
incrementally), and per-pool usage is summed from one pass over the NodeClaims."""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as L
from nodewright.controllers.nodepool_status import NodePoolStatusController
from nodewright.kube import resources as r

from .conftest import pending_pod


def _series(ctx: Any) -> dict[tuple[str, ...], float]:
    out = {}
    for family in ctx.metrics.registry.collect():
        if family.name == "karpenter_pods_state":
            for s in family.samples:
                lbl = s.labels
                out[(lbl["name"], lbl["node"], lbl["nodepool"], lbl["phase"])] = s.value
    return out


def test_pods_state_series_follow_pods_and_phases(ctx, cluster, clock) -> None:
    cluster.create(r.NODES, {"metadata": {"name": "n1", "labels": {L.NODEPOOL: "general"}},
                             "status": {"allocatable": {"cpu": "2"}}})
    cluster.create(r.NODES, {"metadata": {"name": "byo"}, "status": {"allocatable": {"cpu": "2"}}})
    for name, node in (("a", "n1"), ("b", "n1"), ("c", "byo")):
        pod = pending_pod(name)
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
        cluster.create(r.PODS, pod)
    cluster.create(r.PODS, pending_pod("d"))
    status = NodePoolStatusController(ctx)
    status.reconcile(force=True)
    assert _series(ctx) == {("a", "n1", "general", "Running"): 1.0, ("b", "n1", "general", "Running"): 1.0,
                            ("c", "byo", "", "Running"): 1.0, ("d", "", "", "Pending"): 1.0}
    cluster.delete(r.PODS, "a", "default")
    cluster.patch_status(r.PODS, "b", {"phase": "Succeeded"}, "default")
    cluster.patch(r.PODS, "d", {"spec": {"nodeName": "n1"}}, "default")
    status.reconcile(force=True)
    assert _series(ctx) == {("b", "n1", "general", "Succeeded"): 1.0, ("c", "byo", "", "Running"): 1.0,
                            ("d", "n1", "general", "Pending"): 1.0}
    assert ctx.metrics.value("karpenter_pods_state", {
        "name": "d", "namespace": "default", "owner": "", "node": "n1", "scheduled": "true", "nodepool": "general",
        "zone": "", "arch": "", "capacity_type": "", "instance_type": "", "phase": "Pending", "ready": "false",
        "managed": "true"}) == 1.0


def test_usage_sums_only_the_pools_own_live_nodeclaims(ctx, cluster, clock) -> None:
    other = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "batch"},
             "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
                 "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
    cluster.create(r.NODEPOOLS, other)
    for name, pool, cpu in (("g1", "general", "2"), ("g2", "general", "4"), ("b1", "batch", "8"), ("gone", "general", "16")):
        cluster.create(r.NODECLAIMS, {"metadata": {"name": name, "labels": {L.NODEPOOL: pool}, "finalizers": ["x"]},
                                      "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                "name": "default"}, "requirements": []},
                                      "status": {"capacity": {"cpu": cpu, "memory": "1Gi", "pods": "10"}}})
    cluster.delete(r.NODECLAIMS, "gone")  # deleting: not counted
    NodePoolStatusController(ctx).reconcile(force=True)
    assert cluster.get(r.NODEPOOLS, "general")["status"]["resources"] == {
        "cpu": "6", "memory": "2Gi", "pods": "20", "nodes": "2"}
    assert cluster.get(r.NODEPOOLS, "batch")["status"]["resources"] == {
        "cpu": "8", "memory": "1Gi", "pods": "10", "nodes": "1"}
    assert ctx.metrics.value("karpenter_nodepools_usage", {"nodepool": "general", "resource_type": "cpu"}) == 6.0


def _pool_series(ctx: Any, family: str) -> dict[tuple[str, str], float]:
    return {(s.labels["nodepool"], s.labels["resource_type"]): s.value for f in ctx.metrics.registry.collect()
            if f.name == family for s in f.samples}


def test_a_withdrawn_limit_and_a_deleted_pool_leave_no_series(ctx, cluster, clock) -> None:
    """A limit series outliving its ``spec.limits`` entry would keep NodewrightNodePoolNearLimit judging usage
    against it; a deleted pool would stay in the dashboards' NodePool list."""
    cluster.create(r.NODEPOOLS, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "batch"},
                                 "spec": {"limits": {"cpu": "10", "memory": "8Gi"}, "template": {"spec": {
                                     "requirements": [], "nodeClassRef": {
                                         "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})
    status = NodePoolStatusController(ctx)
    status.reconcile(force=True)
    assert {k: v for k, v in _pool_series(ctx, "karpenter_nodepools_limit").items() if k[0] == "batch"} == {
        ("batch", "cpu"): 10.0, ("batch", "memory"): 8 * 1024 ** 3}
    assert {k for k in _pool_series(ctx, "karpenter_nodepools_usage") if k[0] == "batch"} == {
        ("batch", "cpu"), ("batch", "memory"), ("batch", "pods"), ("batch", "ephemeral-storage")}
    cluster.patch(r.NODEPOOLS, "batch", {"spec": {"limits": {"cpu": "20", "memory": None}}})
    status.reconcile(force=True)
    assert {k: v for k, v in _pool_series(ctx, "karpenter_nodepools_limit").items() if k[0] == "batch"} == {
        ("batch", "cpu"): 20.0}
    cluster.delete(r.NODEPOOLS, "batch")
    status.reconcile(force=True)
    assert not [k for k in _pool_series(ctx, "karpenter_nodepools_limit") if k[0] == "batch"]
    assert not [k for k in _pool_series(ctx, "karpenter_nodepools_usage") if k[0] == "batch"]
