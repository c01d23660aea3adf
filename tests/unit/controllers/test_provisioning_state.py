"""Provisioning over cluster state (issue 14): which pods of a deleting node need new capacity, terminating
pending pods, and finished pods that no longer hold their node."""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as L
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.scheduling import schedule
from nodewright.state.cluster import snapshot

from .conftest import pending_pod

NODE = "ip-10-0-0-9.ec2.internal"


def _managed_node(cluster: InMemoryCluster, deleting: bool) -> None:
    cluster.create(r.NODES, {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "finalizers": [L.TERMINATION_FINALIZER],
                     "labels": {L.HOSTNAME: NODE, L.NODEPOOL: "general", L.INSTANCE_TYPE: "c5.large",
                                L.CAPACITY_TYPE: "on-demand", L.ZONE: "us-east-1a", L.ARCH: "amd64", L.OS: "linux"}},
        "spec": {"providerID": "aws:///us-east-1a/i-0123456789abcdef0"},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                   "allocatable": {"cpu": "1900m", "memory": "3584Mi", "pods": "29"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
    if deleting:
        cluster.delete(r.NODES, NODE)


def _bound(cluster: InMemoryCluster, name: str, *, owner: str | None = None, terminating: bool = False,
           phase: str = "Running", cpu: str = "500m", labels: dict[str, str] | None = None) -> None:
    pod: dict[str, Any] = pending_pod(name, cpu=cpu)
    pod["spec"]["nodeName"] = NODE
    pod["status"] = {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True"}]}
    if labels:
        pod["metadata"]["labels"] = labels
    if owner:
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "owner"}]
    if terminating:
        pod["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.create(r.PODS, pod)
    if terminating:
        cluster.delete(r.PODS, name, "default")


def _pending_names(ctx: Any, cluster: InMemoryCluster, clock: Any) -> list[str]:
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    return sorted(p["metadata"]["name"] for p in prov.pending_pods(snapshot(cluster), clock()))


def test_deleting_node_pods_follow_karpenter_reschedulable_rule(ctx, cluster, clock) -> None:
    _managed_node(cluster, deleting=True)
    _bound(cluster, "active")
    _bound(cluster, "going", terminating=True)
    _bound(cluster, "rs-going", owner="ReplicaSet", terminating=True)
    _bound(cluster, "sts-going", owner="StatefulSet", terminating=True)
    _bound(cluster, "daemon", owner="DaemonSet")
    _bound(cluster, "done", phase="Succeeded")
    assert _pending_names(ctx, cluster, clock) == ["active", "sts-going"]


def test_deleting_node_pod_held_by_a_blocking_pdb_needs_no_capacity(ctx, cluster, clock) -> None:
    _managed_node(cluster, deleting=True)
    _bound(cluster, "held", labels={"app": "db"})
    _bound(cluster, "free", labels={"app": "web"})
    cluster.create(r.PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": "db", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "db"}}, "maxUnavailable": 0}})
    assert _pending_names(ctx, cluster, clock) == ["free"]


def test_budget_at_its_limit_does_not_hold_back_but_do_not_disrupt_does(ctx, cluster, clock) -> None:
    """``minAvailable: 2`` over two pods allows no eviction now, yet it is not fully blocking by spec, so the
    pods still get new capacity (Karpenter isFullyBlocked); an active do-not-disrupt pod stays put."""
    _managed_node(cluster, deleting=True)
    _bound(cluster, "web-0", labels={"app": "web"})
    _bound(cluster, "web-1", labels={"app": "web"})
    pinned = pending_pod("pinned")
    pinned["metadata"]["annotations"] = {L.DO_NOT_DISRUPT: "true"}
    pinned["spec"]["nodeName"] = NODE
    pinned["status"] = {"phase": "Running"}
    cluster.create(r.PODS, pinned)
    cluster.create(r.PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": "web", "namespace": "default"},
                            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2}})
    assert _pending_names(ctx, cluster, clock) == ["web-0", "web-1"]


def test_terminating_pending_pod_is_ignored(ctx, cluster, clock) -> None:
    cluster.create(r.PODS, pending_pod("waiting"))
    going = pending_pod("going")
    going["metadata"]["finalizers"] = ["example.com/hold"]
    cluster.create(r.PODS, going)
    cluster.delete(r.PODS, "going", "default")
    assert _pending_names(ctx, cluster, clock) == ["waiting"]


def test_finished_and_terminating_pods_free_their_node(ctx, cluster, clock) -> None:
    """Two 900m pods fill the c5.large's 1900m; once one Succeeded and the other is terminating, a 1-vCPU
    pending pod goes to that node and no NodeClaim is created."""
    _managed_node(cluster, deleting=False)
    _bound(cluster, "done", phase="Succeeded", cpu="900m")
    _bound(cluster, "going", terminating=True, cpu="900m")
    cluster.create(r.PODS, pending_pod("p", cpu="1"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    state = snapshot(cluster)
    result = prov.provision(prov.pending_pods(state, clock()), state, clock())
    assert result is not None and not result.new_nodeclaims
    assert {p.name: n for n, ps in result.existing.items() for p in ps} == {"p": NODE}


def _provision_one(ctx: Any, cluster: InMemoryCluster, clock: Any) -> Any:
    cluster.create(r.PODS, pending_pod("p"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    state = snapshot(cluster)
    return prov.provision(prov.pending_pods(state, clock()), state, clock())


def test_nodepool_not_ready_launches_nothing(ctx, cluster, clock) -> None:
    cluster.patch_status(r.NODEPOOLS, "general", {"conditions": [
        {"type": "Ready", "status": "False", "reason": "NodeClassNotReady", "message": "EC2NodeClass not ready"}]})
    result = _provision_one(ctx, cluster, clock)
    assert result is not None and not result.new_nodeclaims and "default/p" in result.unschedulable
    assert cluster.list(r.NODECLAIMS) == []


def test_deleting_nodepool_launches_nothing(ctx, cluster, clock) -> None:
    cluster.patch(r.NODEPOOLS, "general", {"metadata": {"finalizers": [L.TERMINATION_FINALIZER]}})
    cluster.delete(r.NODEPOOLS, "general")
    result = _provision_one(ctx, cluster, clock)
    assert result is not None and not result.new_nodeclaims and "default/p" in result.unschedulable


def test_ready_nodepool_launches(ctx, cluster, clock) -> None:
    cluster.patch_status(r.NODEPOOLS, "general", {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]})
    result = _provision_one(ctx, cluster, clock)
    assert result is not None and [c.instance_type.name for c in result.new_nodeclaims] == ["c5.large"]


def _daemonset(cpu: str | None = None) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "a", "image": "agent", "resources": resources}]}}}}


def _limit_range(namespace: str, **item: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": namespace},
            "spec": {"limits": [{"type": "Container", **item}]}}


def _overhead(ctx: Any, cluster: InMemoryCluster, clock: Any) -> dict[str, int]:
    result = _provision_one(ctx, cluster, clock)
    assert result is not None and len(result.new_nodeclaims) == 1
    return dict(result.new_nodeclaims[0].daemonset_overhead)


def test_limit_range_default_request_fills_a_daemonset_template(ctx, cluster, clock) -> None:
    cluster.create(r.DAEMONSETS, _daemonset())
    cluster.create(r.LIMITRANGES, _limit_range("kube-system", defaultRequest={"cpu": "250m"}))
    cluster.create(r.LIMITRANGES, _limit_range("default", defaultRequest={"cpu": "2"}))  # another namespace's
    assert _overhead(ctx, cluster, clock).get("cpu") == 250


def test_limit_range_default_limit_stands_for_the_request(ctx, cluster, clock) -> None:
    cluster.create(r.DAEMONSETS, _daemonset())
    cluster.create(r.LIMITRANGES, _limit_range("kube-system", default={"cpu": "300m"}))
    assert _overhead(ctx, cluster, clock).get("cpu") == 300


def test_daemonset_overhead_comes_from_its_running_pod(ctx, cluster, clock) -> None:
    """A mutating webhook raised the agent's pod to 400m: that, not the template's 100m, is the overhead; the
    pod's pin to its own node (the DaemonSet controller's matchFields) does not stop it counting."""
    cluster.create(r.DAEMONSETS, _daemonset(cpu="100m"))
    _managed_node(cluster, deleting=False)
    agent = pending_pod("agent-x1", cpu="400m")
    agent["metadata"].update(namespace="kube-system", ownerReferences=[{"kind": "DaemonSet", "name": "agent"}])
    agent["spec"]["nodeName"] = NODE
    agent["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}}
    agent["status"] = {"phase": "Running"}
    cluster.create(r.PODS, agent)
    cluster.create(r.PODS, pending_pod("big", cpu="1800m"))  # no room left on the c5.large
    assert _overhead(ctx, cluster, clock).get("cpu") == 400


def test_pod_affinity_namespace_selector_matches_namespace_labels(ctx, cluster, clock) -> None:
    """The follower must share a node with a ``security: s2`` pod of a namespace labelled ``team: a``: it goes
    to the node where team-a's pod runs, not to a new NodeClaim; relabelling the namespace drops the match."""
    _managed_node(cluster, deleting=False)
    cluster.create(r.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}})
    target = pending_pod("target", cpu="100m")
    target["metadata"].update(namespace="team-a", labels={"security": "s2"})
    target["spec"]["nodeName"] = NODE
    target["status"] = {"phase": "Running"}
    cluster.create(r.PODS, target)
    follower = pending_pod("follower", cpu="100m")
    follower["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"security": "s2"}},
        "namespaceSelector": {"matchLabels": {"team": "a"}}}]}}
    cluster.create(r.PODS, follower)
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    state = snapshot(cluster)
    result = prov.provision(prov.pending_pods(state, clock()), state, clock())
    assert result is not None and [p.name for p in result.existing.get(NODE, [])] == ["follower"]
    cluster.patch(r.NAMESPACES, "team-a", {"metadata": {"labels": {"team": "b"}}})
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)  # a fresh one: the first nominated the pod
    state = snapshot(cluster)
    result = prov.provision(prov.pending_pods(state, clock()), state, clock())
    assert result is not None and NODE not in result.existing


def _claiming_pod(claim: str) -> dict[str, Any]:
    pod = pending_pod("p")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


def _claim(name: str, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if spec.get("volumeName"):
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
            "spec": {"accessModes": ["ReadWriteOnce"], **spec}}


def _plan(ctx: Any, cluster: InMemoryCluster, clock: Any) -> Any:
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    state = snapshot(cluster)
    return prov.provision(prov.pending_pods(state, clock()), state, clock())


def test_bound_volume_zone_decides_the_nodeclaim_zone(ctx, cluster, clock) -> None:
    cluster.create(r.PVS, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-b"}, "spec": {
        "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": L.ZONE, "operator": "In", "values": ["us-east-1b"]}]}]}}}})
    cluster.create(r.PVCS, _claim("data", volumeName="pv-b"))
    cluster.create(r.PODS, _claiming_pod("data"))
    result = _plan(ctx, cluster, clock)
    assert result is not None and [c.offering.zone for c in result.new_nodeclaims] == ["us-east-1b"]


def test_storage_class_allowed_topologies_and_unusable_claims(ctx, cluster, clock) -> None:
    """WaitForFirstConsumer with allowedTopologies pins the zone; an Immediate class keeps the pod pending with
    the reason (its volume is bound before it can schedule)."""
    for name, mode in (("wffc", "WaitForFirstConsumer"), ("now", "Immediate")):
        cluster.create(r.STORAGECLASSES, {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": mode,
            "allowedTopologies": [{"matchLabelExpressions": [{"key": L.ZONE, "values": ["us-east-1b"]}]}]})
    cluster.create(r.PVCS, _claim("data", storageClassName="wffc"))
    cluster.create(r.PODS, _claiming_pod("data"))
    result = _plan(ctx, cluster, clock)
    assert result is not None and [c.offering.zone for c in result.new_nodeclaims] == ["us-east-1b"]

    cluster.delete(r.PODS, "p", "default")
    cluster.create(r.PVCS, _claim("later", storageClassName="now"))
    cluster.create(r.PODS, _claiming_pod("later"))
    result = _plan(ctx, cluster, clock)
    assert result is not None and not result.new_nodeclaims
    assert "Immediate" in result.unschedulable["default/p"]
