"""The kube-scheduler model of scenario replay (issue 25): filter, then score as the default profile does.

Expected values are worked by hand from kube-scheduler's formulas (``pkg/scheduler/framework/plugins``).
"""

from __future__ import annotations

import random
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.catalog import load_instance_types
from nodewright.cloud.simulated import LatencyDistribution, SimulatedEC2
from nodewright.cloud.simulated.ec2 import READY, REGISTERED, RUNNING
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.scheduling import pod_from_manifest
from nodewright.scheduling.taints import taint_from_dict
from nodewright.sim.kubelet import NOT_READY_LIFT_SECONDS, SimulatedKubelet
from nodewright.sim.kubescheduler import (
    ASSIGNED_POD_ADD,
    NODE_ADD,
    NODE_UPDATE,
    NOMINATION_GONE,
    KubeScheduler,
    NodeInfo,
    balanced_allocation,
    default_normalize,
    least_allocated,
    queue_hint,
)
from nodewright.sim.world import SimClock

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


# --- nominations kube-scheduler clears, waves, the two-step Ready -------------------------------------------------

def _pod_doc(cluster: InMemoryCluster, name: str) -> dict[str, Any]:
    pod = cluster.get(r.PODS, name, "default")
    assert pod is not None
    return pod


def test_a_failed_attempt_clears_the_nomination_unless_clearing_is_off() -> None:
    # "booting" still carries the not-ready taint: the pod nominated there fits nowhere, preemption finds no victim,
    # and kube-scheduler clears its nomination (Evaluator.Preempt: NewPostFilterResultWithNominatedNode("")).
    booting = _node("booting", taints=[{"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}])
    cluster, scheduler = _cluster([booting], [_pod("web-0", nominated="booting")])
    scheduler.tick()
    status = _pod_doc(cluster, "web-0")["status"]
    assert "nominatedNodeName" not in status
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("PodScheduled", "False", "Unschedulable")]
    assert scheduler.cleared == [("default/web-0", "booting")]
    cluster = InMemoryCluster(lambda: 1_800_000_000.0)
    scheduler = KubeScheduler(cluster, seed=1, clear_nominations=False)
    cluster.create(r.NODES, booting)
    cluster.create(r.PODS, _pod("web-0", nominated="booting"))
    scheduler.tick()
    assert _pod_doc(cluster, "web-0")["status"]["nominatedNodeName"] == "booting" and scheduler.cleared == []


def test_preemption_policy_never_keeps_the_nomination() -> None:
    # Not eligible to preempt (DefaultPreemption.PodEligibleToPreemptOthers): PostFilter returns no result, so the
    # failed attempt leaves the nomination alone.
    booting = _node("booting", taints=[{"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}])
    cluster, scheduler = _cluster([booting], [_pod("web-0", nominated="booting", preemptionPolicy="Never")])
    scheduler.tick()
    assert _pod_doc(cluster, "web-0")["status"]["nominatedNodeName"] == "booting"
    assert scheduler.cleared == []


def test_a_cleared_nomination_frees_room_another_pod_takes_in_the_same_wave() -> None:
    # "a" has room for one 1.5-cpu pod. b-planned is nominated there but needs an ssd node that does not exist; a-web
    # comes first in the queue and finds a's room held by that nomination. b-planned's attempt fails and clears it,
    # which re-queues a-web (AssignedPodDelete): the wave's next pass binds it to "a".
    nodes = [_node("a", cpu="2", memory="8Gi")]
    pods = [_pod("a-web", cpu="1500m"), _pod("b-planned", cpu="1500m", nominated="a", nodeSelector={"disk": "ssd"})]
    cluster, scheduler = _cluster(nodes, pods)
    scheduler.tick()
    assert _placed(cluster) == {"a-web": "a", "b-planned": ""}
    assert scheduler.cleared == [("default/b-planned", "a")] and scheduler.passes == 2
    # A nomination kube-scheduler keeps (the model's old behaviour) holds the room for good.
    cluster = InMemoryCluster(lambda: 1_800_000_000.0)
    scheduler = KubeScheduler(cluster, seed=1, clear_nominations=False)
    cluster.create(r.NODES, nodes[0])
    for pod in pods:
        cluster.create(r.PODS, pod)
    scheduler.tick()
    assert _placed(cluster) == {"a-web": "", "b-planned": ""}


def test_pods_nominated_to_a_node_count_in_its_spread_domain() -> None:
    # Zone spread, maxSkew 1. web-1 is nominated to "a" (zone a); web-0 comes first. Counting web-1 in zone a
    # (PodTopologySpread's PreFilter AddPod), "a" would give zone a 2 against zone b's 0: web-0 goes to "b", though
    # LeastAllocated prefers the larger "a"; web-1 then takes its nominated node.
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                             "labelSelector": {"matchLabels": {"app": "web"}}}]}
    nodes = [_node("a", cpu="8", zone="us-east-1a"), _node("b", cpu="2", memory="4Gi", zone="us-east-1b")]
    cluster, scheduler = _cluster(nodes, [_pod("web-0", cpu="500m", **spread),
                                          _pod("web-1", cpu="500m", nominated="a", **spread)])
    scheduler.tick()
    assert _placed(cluster) == {"web-0": "b", "web-1": "a"}
    assert scheduler.cleared == []


def test_setting_a_nomination_queues_nothing_and_clearing_one_queues_the_others() -> None:
    nodes = [_node("a", cpu="2", memory="8Gi")]
    cluster, scheduler = _cluster(nodes, [_pod("a-web", cpu="1500m"), _pod("b-held", cpu="1500m", nominated="a",
                                                                            preemptionPolicy="Never",
                                                                            nodeSelector={"disk": "ssd"})])
    scheduler.tick()
    assert _placed(cluster) == {"a-web": "", "b-held": ""}  # the room stays held: preemptionPolicy Never
    assert scheduler.tick() == []  # nothing changed: no wave
    cluster.patch_status(r.PODS, "a-web", {"nominatedNodeName": "a"}, "default")
    waves = scheduler.waves
    assert scheduler.tick() == [] and scheduler.waves == waves  # a nomination set: nothing queued
    cluster.patch_status(r.PODS, "b-held", {"nominatedNodeName": None}, "default")  # its owner clears it
    assert scheduler.tick() == [("default/a-web", "a")]


def test_a_node_turns_ready_in_two_updates_and_its_pods_move_at_the_taint_lift() -> None:
    clock = SimClock(1_800_000_000.0)
    cluster = InMemoryCluster(clock)
    scheduler = KubeScheduler(cluster, seed=1, clock=clock)
    ec2 = SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0))  # running 9 s, registered 22, Ready 30
    kubelet = SimulatedKubelet(cluster, ec2, clock, "us-east-1", start_delay=5.0)
    it = next(t for t in load_instance_types("us-east-1") if t.name == "m5.xlarge")
    offering = next(o for o in it.offerings if o.capacity_type == "on-demand" and o.zone == "us-east-1a")
    instance = ec2.run_instance(it, offering, node_labels={L.ZONE: "us-east-1a"})
    for i in range(3):
        cluster.create(r.PODS, _pod(f"web-{i}", cpu="500m"))
    scheduler.tick()  # no node: Unschedulable (rejected by no plugin)
    clock.now = instance.launched_at + 22.0
    assert [k for k, _ in kubelet.apply_transitions(clock.now)] == [RUNNING, REGISTERED]
    name = instance.node_name
    scheduler.tick()  # Node added: it may fit them (NodeResourcesFit's hint), the not-ready taint rejects them
    assert scheduler.cleared == [] and _placed(cluster) == {f"web-{i}": "" for i in range(3)}
    for i in range(3):  # nominated now (as the controller does): a status change, nothing is queued
        cluster.patch_status(r.PODS, f"web-{i}", {"nominatedNodeName": name}, "default")
    clock.now = instance.launched_at + 30.0
    assert [k for k, _ in kubelet.apply_transitions(clock.now)] == [READY]
    node = cluster.get(r.NODES, name)
    assert node is not None and [t["key"] for t in node["spec"]["taints"]] == [L.NOT_READY_TAINT_KEY]
    assert kubelet.next_lift() == clock.now + NOT_READY_LIFT_SECONDS
    # The Ready update: no plugin registers a condition change, and TaintToleration's hint still sees the taint.
    waves = scheduler.waves
    assert scheduler.tick(NOT_READY_LIFT_SECONDS) == [] and scheduler.waves == waves
    clock.now += NOT_READY_LIFT_SECONDS
    assert kubelet.lift_not_ready_taints(clock.now) == 1
    node = cluster.get(r.NODES, name)
    assert node is not None and not node["spec"]["taints"]
    assert sorted(scheduler.tick()) == [(f"default/web-{i}", name) for i in range(3)]  # each to its nominated node
    assert scheduler.cleared == []


def test_a_wave_reaches_only_the_pods_it_has_time_for_before_the_next_event() -> None:
    # "small" is Ready and full for them (NodeResourcesFit rejects them there), "booting" carries the not-ready
    # taint. A Node added that could fit them moves all three back to the active queue; with 11 ms before the next
    # event the wave makes two attempts (ATTEMPT_SECONDS each): two nominations cleared, the third still in place.
    booting = _node("booting", taints=[{"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}])
    cluster = InMemoryCluster(lambda: 1_800_000_000.0)
    scheduler = KubeScheduler(cluster, seed=1, clear_nominations=False)
    for node in (_node("small", cpu="500m"), booting):
        cluster.create(r.NODES, node)
    for i in range(3):
        cluster.create(r.PODS, _pod(f"web-{i}", cpu="1", nominated="booting"))
    scheduler.tick()  # tried once: rejected by NodeResourcesFit ("small") and TaintToleration ("booting")
    assert scheduler.cleared == [] and _placed(cluster) == {f"web-{i}": "" for i in range(3)}
    scheduler.clear_nominations = True
    cluster.create(r.NODES, _node("late", taints=[{"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}]))
    assert scheduler.tick(NOT_READY_LIFT_SECONDS) == []
    assert scheduler.cleared == [("default/web-0", "booting"), ("default/web-1", "booting")]
    assert _pod_doc(cluster, "web-2")["status"]["nominatedNodeName"] == "booting"
    scheduler.tick()  # the rest of the wave
    assert [key for key, _ in scheduler.cleared] == ["default/web-0", "default/web-1", "default/web-2"]


def test_queueing_hints_decide_which_pods_an_event_moves() -> None:
    pod = pod_from_manifest(_pod("p", cpu="1"))
    not_ready = (taint_from_dict({"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}),)
    booting = NodeInfo("n", {}, not_ready, {"cpu": 4000, "memory": 16 * GIB, "pods": 110}, False, ready=False)
    small = NodeInfo("s", {}, not_ready, {"cpu": 500, "memory": 16 * GIB, "pods": 110}, False, ready=False)
    taints, room = frozenset({"TaintToleration"}), frozenset({"TaintToleration", "NodeResourcesFit"})
    # A booting Node added: it may fit the pod (NodeResourcesFit's hint reads allocatable only), its taint rejects it.
    assert queue_hint(NODE_ADD, frozenset(), 0, pod, room, booting)
    assert not queue_hint(NODE_ADD, frozenset(), 0, pod, room, small)
    assert not queue_hint(NODE_ADD, frozenset(), 0, pod, taints, booting)  # rejected only by taints: still tainted
    # Ready with the taint on moves nothing; the lift moves the pods that tolerate what is left.
    assert not queue_hint(NODE_UPDATE, frozenset({"conditions"}), 0, pod, taints, booting)
    lifted = NodeInfo("n", {}, (), booting.allocatable, True)
    assert queue_hint(NODE_UPDATE, frozenset({"taints"}), 0, pod, taints, lifted)
    # A nomination gone frees room for pods of at most its priority; a pod bound helps only spread/affinity.
    high = pod_from_manifest(_pod("h", cpu="1", priority=10))
    assert queue_hint(NOMINATION_GONE, frozenset(), 10, high, room, None)
    assert not queue_hint(NOMINATION_GONE, frozenset(), 0, high, room, None)
    assert not queue_hint(ASSIGNED_POD_ADD, frozenset(), 0, pod, room, None)
    assert queue_hint(ASSIGNED_POD_ADD, frozenset(), 0, pod, frozenset({"PodTopologySpread"}), None)
