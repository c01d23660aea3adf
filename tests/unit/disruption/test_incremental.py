"""ViewCache: the incremental ClusterView equals view_from_state after every change, and rebuilds only what changed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.disruption.model import ClusterView
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import name_of
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.disruption_view import view_from_state
from nodewright.state.incremental_view import ViewCache

from .helpers import BY_NAME, CATALOG, NOW

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
    "spec": {"template": {"spec": {
        "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
        "disruption": {"consolidateAfter": "30s", "budgets": [{"nodes": "100%"}]}},
}
NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "node", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
    "status": {"amis": [{"id": "ami-1"}], "subnets": [{"id": "subnet-1", "zone": "us-east-1a"}]},
}


class Clock:
    now = NOW

    def __call__(self) -> float:
        return self.now


def _pod(name: str, node: str, cpu: int, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": name.split("-")[0]}, **extra},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m"}}}]},
            "status": {"phase": "Running"}}


def add_node(cluster: InMemoryCluster, name: str, type_name: str, capacity_type: str, cpus: list[int]) -> None:
    it = BY_NAME[type_name]
    labels = {L.NODEPOOL: "default", L.INSTANCE_TYPE: type_name, L.ZONE: "us-east-1b",
              L.CAPACITY_TYPE: capacity_type, L.INITIALIZED: "true"}
    pid = f"aws:///us-east-1b/i-{name}"
    alloc = {"cpu": f"{it.capacity['cpu']}m", "memory": str(it.capacity["memory"]), "pods": "110"}
    cluster.create(r.NODECLAIMS, {
        "metadata": {"name": f"{name}-claim", "labels": dict(labels)},
        "spec": {"requirements": [], "expireAfter": "720h",
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": pid, "nodeName": name, "allocatable": alloc, "imageID": "ami-1",
                   "conditions": [{"type": "Initialized", "status": "True"}]}})
    cluster.create(r.NODES, {
        "metadata": {"name": name, "labels": {**labels, L.HOSTNAME: name}}, "spec": {"providerID": pid},
        "status": {"allocatable": alloc, "capacity": alloc, "conditions": [{"type": "Ready", "status": "True"}]}})
    for i, cpu in enumerate(cpus):
        cluster.create(r.PODS, _pod(f"{name}-p{i}", name, cpu))


@pytest.fixture
def cluster() -> InMemoryCluster:
    c = InMemoryCluster(Clock(), seed=5)
    c.create(r.NODEPOOLS, NODEPOOL)
    c.create(r.EC2NODECLASSES, NODECLASS)
    c.create(r.DAEMONSETS, {"metadata": {"name": "agent", "namespace": "kube-system"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}}})
    c.create(r.PDBS, {"metadata": {"name": "n1-pdb", "namespace": "default"},
                      "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "n1"}}}})
    add_node(c, "n0", "c.medium", "on-demand", [500, 700])
    add_node(c, "n1", "c.large", "spot", [2000])
    add_node(c, "n2", "c.small", "on-demand", [])
    c.create(r.NODES, {"metadata": {"name": "byo", "labels": {L.HOSTNAME: "byo"}}, "spec": {},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    c.create(r.PODS, _pod("byo-p0", "byo", 1000))
    return c


def assert_same(got: Any, want: Any, path: str = "view") -> None:
    """Field-by-field, in order (dataclasses, lists, dicts); other values by ==."""
    if dataclasses.is_dataclass(got) and not isinstance(got, type):
        assert type(got) is type(want), path
        for f in dataclasses.fields(got):
            if f.name.startswith("_"):
                continue  # a private memo (a Pool's price index), not part of the view
            assert_same(getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}")
    elif isinstance(got, (list, tuple)):
        assert len(got) == len(want), path
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(got, dict):
        assert list(got) == list(want), path
        for k in got:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def build(cache: ViewCache, state: ClusterState, types: list[InstanceType] | None = None,
          events: dict[str, float] | None = None, drift: dict[str, str | None] | None = None) -> ClusterView:
    by_pool = {"default": types if types is not None else CATALOG}
    got = cache.build(state, NOW, by_pool, events, drift)
    assert_same(got, view_from_state(state, NOW, by_pool, events, drift))
    return got


def by_name(view: ClusterView) -> dict[str, Any]:
    return {n.name: n for n in view.nodes}


def test_first_view_equals_the_full_rebuild(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    view = build(cache, snapshot(cluster))
    nodes = by_name(view)
    assert list(nodes) == ["n0", "n1", "n2"]
    assert {n: node.price for n, node in nodes.items()} == {"n0": 0.20, "n1": 0.16, "n2": 0.10}
    assert [p.name for p in nodes["n0"].pods] == ["n0-p0", "n0-p1"]
    assert [n.name for n in view.unmanaged] == ["byo"] and len(view.unmanaged[0].pods) == 1
    assert [(p.name, p.disruptions_allowed) for p in view.pdbs] == [("n1-pdb", 0)]
    assert view.nodeclasses["default"].ami_ids == frozenset({"ami-1"})
    assert (cache.stats.nodes_rebuilt, cache.stats.nodes_reused, cache.stats.pools_rebuilt) == (3, 0, 1)


def test_an_unchanged_cluster_reuses_every_node_and_pool(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    first = build(cache, snapshot(cluster))
    second = build(cache, snapshot(cluster))
    assert (cache.stats.nodes_rebuilt, cache.stats.nodes_reused, cache.stats.pools_rebuilt) == (0, 3, 0)
    assert all(a is b for a, b in zip(first.nodes, second.nodes, strict=True))
    assert second.pools["default"] is first.pools["default"]
    assert second.daemonsets is first.daemonsets


def test_only_the_node_whose_pods_changed_is_rebuilt(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    first = by_name(build(cache, snapshot(cluster)))
    cluster.create(r.PODS, _pod("late", "n2", 300))
    second = by_name(build(cache, snapshot(cluster)))
    assert (cache.stats.nodes_rebuilt, cache.stats.nodes_reused) == (1, 2)
    assert second["n0"] is first["n0"] and second["n1"] is first["n1"]
    assert [p.name for p in second["n2"].pods] == ["late"]
    # A pod finishing changes its resourceVersion, not the node's objects: n0 is rebuilt without it.
    cluster.patch_status(r.PODS, "n0-p1", {"phase": "Succeeded"}, "default")
    third = by_name(build(cache, snapshot(cluster)))
    assert cache.stats.nodes_rebuilt == 1
    assert [p.name for p in third["n0"].pods] == ["n0-p0"]
    cluster.delete(r.PODS, "n0-p0", "default")
    assert by_name(build(cache, snapshot(cluster)))["n0"].pods == []


def test_node_and_nodeclaim_changes_rebuild_that_node(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    build(cache, snapshot(cluster))
    cluster.patch(r.NODES, "n1", {"metadata": {"annotations": {L.DO_NOT_DISRUPT: "true"}}})
    view = by_name(build(cache, snapshot(cluster)))
    assert cache.stats.nodes_rebuilt == 1 and view["n1"].do_not_disrupt is True
    cluster.patch(r.NODECLAIMS, "n2-claim", {"spec": {"expireAfter": "1h"}})
    view = by_name(build(cache, snapshot(cluster)))
    assert cache.stats.nodes_rebuilt == 1 and view["n2"].expire_after == 3600.0
    cluster.patch(r.NODECLAIMS, "n1-claim", {"metadata": {"finalizers": ["x"]}})
    cluster.delete(r.NODECLAIMS, "n1-claim")
    view = by_name(build(cache, snapshot(cluster)))
    assert view["n1"].deleting is True


def test_pass_dependent_fields_make_a_new_node_sharing_the_conversion(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    first = by_name(build(cache, snapshot(cluster)))
    second = by_name(build(cache, snapshot(cluster), events={"n0": NOW - 5}, drift={"n1-claim": "AMIDrift"}))
    assert cache.stats.nodes_rebuilt == 0
    assert second["n0"] is not first["n0"] and second["n0"].last_pod_event == NOW - 5
    assert second["n0"].view is first["n0"].view and second["n0"].pods is first["n0"].pods
    assert second["n1"].cloud_drift == "AMIDrift" and first["n1"].cloud_drift is None
    assert second["n2"] is first["n2"]


def test_new_prices_and_nodepool_changes_rebuild_the_pool_not_the_nodes(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    build(cache, snapshot(cluster))
    dearer = [dataclasses.replace(it, offerings=tuple(Offering(o.zone, o.capacity_type, o.price * 2)
                                                      for o in it.offerings)) for it in CATALOG]
    view = by_name(build(cache, snapshot(cluster), types=dearer))
    assert (cache.stats.pools_rebuilt, cache.stats.nodes_rebuilt) == (1, 0)
    assert {n: node.price for n, node in view.items()} == {"n0": 0.40, "n1": 0.32, "n2": 0.20}
    view = by_name(build(cache, snapshot(cluster), types=dearer[1:]))  # c.small no longer offered
    assert view["n2"].price == 0.0
    cluster.patch(r.NODEPOOLS, "default", {"spec": {"disruption": {"budgets": [{"nodes": "1"}]}}})
    pools = build(cache, snapshot(cluster)).pools
    assert cache.stats.pools_rebuilt == 1 and [b.nodes for b in pools["default"].budgets] == ["1"]


def test_objects_without_resource_versions_are_compared_by_identity(cluster: InMemoryCluster) -> None:
    state = snapshot(cluster)
    for objs in (state.pods_by_node.values()):
        for i, pod in enumerate(objs):
            objs[i] = {**pod, "metadata": {k: v for k, v in pod["metadata"].items() if k != "resourceVersion"}}
    cache = ViewCache()
    build(cache, state)
    build(cache, state)
    assert cache.stats.nodes_rebuilt == 0
    pods = state.pods_by_node["n0"]
    pods[0] = {**pods[0], "status": {"phase": "Failed"}}  # a new object: rebuilt
    view = by_name(build(cache, state))
    assert cache.stats.nodes_rebuilt == 1 and [p.name for p in view["n0"].pods] == ["n0-p1"]


def test_vanished_nodes_leave_the_cache(cluster: InMemoryCluster) -> None:
    cache = ViewCache()
    build(cache, snapshot(cluster))
    for claim in ("n0-claim", "n2-claim"):
        cluster.delete(r.NODECLAIMS, claim)
    view = build(cache, snapshot(cluster))
    assert [n.name for n in view.nodes] == ["n1"]
    assert sorted(cache._nodes) == ["n1-claim"]
    assert [name_of(n) for n in cluster.list(r.NODES)] == ["n0", "n1", "n2", "byo"]
