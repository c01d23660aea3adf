"""The kube-scheduler model of scenario replay (issue 25): filter, then score as the default profile does.

Expected values are worked by hand from kube-scheduler's formulas (``pkg/scheduler/framework/plugins``).
"""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as L
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.scheduling import pod_from_manifest
from nodewright.sim.kubescheduler import (
    KubeScheduler,
    NodeInfo,
    balanced_allocation,
    default_normalize,
    least_allocated,
)

GIB = 1024**3


def _node(name: str, cpu: str = "4", memory: str = "16Gi", zone: str = "us-east-1a",
          taints: list[dict[str, str]] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {L.HOSTNAME: name, L.ZONE: zone, **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, cpu: str = "1", memory: str = "1Gi", nominated: str = "", labels: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec},
            "status": status}


def _cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[InMemoryCluster, KubeScheduler]:
    cluster = InMemoryCluster(lambda: 1_800_000_000.0)
    scheduler = KubeScheduler(cluster, seed=1)
    for node in nodes:
        cluster.create(r.NODES, node)
    for pod in pods:
        cluster.create(r.PODS, pod)
    return cluster, scheduler


def _placed(cluster: InMemoryCluster) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in cluster.list(r.PODS)}


def test_least_allocated_and_balanced_allocation_by_hand() -> None:
    pod = pod_from_manifest(_pod("p", cpu="1", memory="1Gi"))
    node = NodeInfo("n", {}, (), {"cpu": 4000, "memory": 16 * GIB, "pods": 110}, True)
    # cpu (4000-1000)*100/4000 = 75, memory (16-1)*100/16 = 93 -> (75+93)//2 = 84
    assert least_allocated(pod, node) == 84
    # with the pod: fractions 0.25 / 0.0625, std 0.09375 -> 90; without: 100 -> 50 + (50 + 90 - 100)/2 = 70
    assert balanced_allocation(pod, node) == 70
    assert default_normalize([0, 2, 4], reverse=False) == [0, 50, 100]
    assert default_normalize([0, 1], reverse=True) == [100, 0]
    assert default_normalize([0, 0], reverse=True) == [100, 100]


def test_least_allocated_spreads_pods_the_packer_would_stack() -> None:
    cluster, scheduler = _cluster([_node("a"), _node("b")], [_pod("web-0"), _pod("web-1")])
    scheduler.tick()
    assert sorted(_placed(cluster).values()) == ["a", "b"]


def test_nominated_node_is_tried_first() -> None:
    # "b" is the worse-scored node (fuller), but the pod is nominated there.
    cluster, scheduler = _cluster([_node("a"), _node("b", cpu="2", memory="4Gi")], [_pod("web-0", nominated="b")])
    scheduler.tick()
    assert _placed(cluster) == {"web-0": "b"}
    assert scheduler.bindings == [("default/web-0", "b", "b")]


def test_pods_nominated_to_a_node_keep_their_room_from_other_pods() -> None:
    # "small" fits one 1.5-cpu pod. big-0 is nominated there; web-0 comes first in the queue (higher priority would
    # override, equal priority does not) and would score "small" ... but its room is promised to big-0.
    nodes = [_node("small", cpu="2", memory="8Gi"), _node("large", cpu="2", memory="8Gi")]
    pods = [_pod("big-0", cpu="1500m", nominated="small"), _pod("web-0", cpu="1500m")]
    cluster, scheduler = _cluster(nodes, pods)
    scheduler.tick()
    assert _placed(cluster) == {"big-0": "small", "web-0": "large"}


def test_without_nomination_a_later_pod_can_take_the_planned_room() -> None:
    # The plan: big (3 cpu) on "x" (4 cpu), small (1 cpu) on "y" (2 cpu). The queue order puts small first and
    # LeastAllocated sends it to "x" (more free room): big is left pending. Nominating both keeps the plan.
    nodes = [_node("x", cpu="3500m"), _node("y", cpu="2")]
    plain = [_pod("a-small", cpu="1"), _pod("b-big", cpu="3")]
    cluster, scheduler = _cluster(nodes, plain)
    scheduler.tick()
    assert _placed(cluster) == {"a-small": "x", "b-big": ""}
    nominated = [_pod("a-small", cpu="1", nominated="y"), _pod("b-big", cpu="3", nominated="x")]
    cluster, scheduler = _cluster(nodes, nominated)
    scheduler.tick()
    assert _placed(cluster) == {"a-small": "y", "b-big": "x"}


def test_filters_spread_taints_ports_and_required_terms() -> None:
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"app": "web"}}}]}
    nodes = [_node("a1", zone="us-east-1a"), _node("a2", zone="us-east-1a"), _node("b1", zone="us-east-1b"),
             _node("t", zone="us-east-1c", taints=[{"key": "gpu", "effect": "NoSchedule"}])]
    cluster, scheduler = _cluster(nodes, [_pod(f"web-{i}", cpu="100m", **spread) for i in range(4)])
    scheduler.tick()
    by_zone: dict[str, int] = {}
    for node in _placed(cluster).values():
        by_zone[node[:1]] = by_zone.get(node[:1], 0) + 1
    # The tainted zone-c node is no candidate, but with nodeTaintsPolicy Ignore (the default) it is a domain with
    # 0 pods: the global minimum stays 0 and zones a and b take one pod each; two pods stay pending.
    assert by_zone == {"a": 1, "b": 1, "": 2}
    ports = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                             "resources": {"requests": {"cpu": "100m"}}}]}
    cluster, scheduler = _cluster([_node("a")], [_pod("p-0", **ports), _pod("p-1", **ports)])
    scheduler.tick()
    assert sorted(_placed(cluster).values()) == ["", "a"]
    ored = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["x"]}]},
        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["y"]}]}]}}}}
    cluster, scheduler = _cluster([_node("plain"), _node("y", labels={"team": "y"})], [_pod("p", **ored)])
    scheduler.tick()
    assert _placed(cluster) == {"p": "y"}  # the second ORed term


def test_preferred_node_affinity_and_prefer_no_schedule_taints_score() -> None:
    preferred = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}
    cluster, scheduler = _cluster([_node("hdd"), _node("ssd", cpu="2", labels={"disk": "ssd"})],
                                  [_pod("p", **preferred)])
    scheduler.tick()
    assert _placed(cluster) == {"p": "ssd"}  # 2 x 100 for affinity beats the emptier node's LeastAllocated
    cluster, scheduler = _cluster([_node("soft", taints=[{"key": "spot", "effect": "PreferNoSchedule"}]),
                                   _node("clean", cpu="2")], [_pod("p")])
    scheduler.tick()
    assert _placed(cluster) == {"p": "clean"}


def test_required_anti_affinity_and_first_pod_affinity() -> None:
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}]}}}
    cluster, scheduler = _cluster([_node("a"), _node("b")], [_pod(f"web-{i}", **anti) for i in range(3)])
    scheduler.tick()
    assert sorted(_placed(cluster).values()) == ["", "a", "b"]
    together = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": L.ZONE, "labelSelector": {"matchLabels": {"app": "db"}}}]}}}
    nodes = [_node("a", zone="us-east-1a"), _node("b", zone="us-east-1b")]
    cluster, scheduler = _cluster(nodes, [_pod("db-0", labels={"app": "db"}, **together),
                                          _pod("db-1", labels={"app": "db"}, **together)])
    scheduler.tick()
    placed = _placed(cluster)
    assert placed["db-0"] == placed["db-1"] != ""  # the first pod may go anywhere, the second follows its zone


def test_system_default_spreading_scores_replicaset_pods_apart() -> None:
    owned = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True}]}
    pods = []
    for i in range(4):
        pod = _pod(f"web-{i}", cpu="100m", memory="100Mi")
        pod["metadata"].update(owned)
        pods.append(pod)
    cluster, scheduler = _cluster([_node("a", zone="us-east-1a"), _node("b", zone="us-east-1b")], pods)
    scheduler.tick()
    assert sorted(_placed(cluster).values()) == ["a", "a", "b", "b"]
