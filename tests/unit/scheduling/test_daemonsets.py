"""DaemonSets per instance type in the scheduling core, on every stage (issue 14): the Karpenter loop with topology,
the re-packer, the cost packer, in-flight nodes, and the disruption screen's room per type. Real c5 types of the
bundled us-east-1 catalog: c5.xlarge (4 vCPU, 3920m allocatable), c5.2xlarge (8), c5.4xlarge (16)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nodewright.api import labels as L
from nodewright.cloud.catalog import load_instance_types
from nodewright.disruption import Pool
from nodewright.disruption.screen import pool_frontier
from nodewright.scheduling import (
    Affinity,
    ExistingNode,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    Pod,
    SchedulingResult,
    TopologySpreadConstraint,
    nodepool_spec_from_model,
    schedule,
)
from nodewright.scheduling.cache import SchedulingCache

GIB = 2**30
C5 = ("c5.xlarge", "c5.2xlarge", "c5.4xlarge")
TYPES = [t for t in load_instance_types("us-east-1") if t.name in C5]
POOL_DOC = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"},
                                           "requirements": [
                                               {"key": L.ZONE, "operator": "In",
                                                "values": ["us-east-1a", "us-east-1b"]},
                                               {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]}}}}
MORE_THAN_8_VCPU = Affinity(node_required=(NodeSelectorTerm(((L.INSTANCE_CPU, "Gt", ("8",)),)),))


def _agent(port: int | None = 9100) -> Pod:
    """A 1500m / 1Gi DaemonSet pod that runs only on types with more than 8 vCPU (here: c5.4xlarge)."""
    return Pod(namespace="kube-system", name="big-agent", requests={"cpu": 1500, "memory": GIB, "pods": 1},
               affinity=MORE_THAN_8_VCPU, host_ports=(HostPort(port),) if port else (), owner_kind="DaemonSet",
               owner_name="big-agent")


def _pod(name: str, cpu: int, **kw: object) -> Pod:
    return Pod(namespace="default", name=name, labels={"app": "web"}, requests={"cpu": cpu, "memory": GIB, "pods": 1},
               **kw)  # type: ignore[arg-type]


def _decide(pods: list[Pod], daemonsets: list[Pod], nodes: Sequence[ExistingNode] = (),
            optimize: bool = True) -> SchedulingResult:
    spec = nodepool_spec_from_model(POOL_DOC, daemonsets)
    return schedule(pods, [], [spec], {"default": TYPES}, inflight=nodes, optimize=optimize)


def test_spread_pods_with_the_port_avoid_the_types_where_the_daemonset_holds_it() -> None:
    # Zone-spread replicas sharing port 9100 go through the Karpenter loop (and the re-packer with optimize): one
    # per node, never on a c5.4xlarge, where big-agent holds the port.
    spread = (TopologySpreadConstraint(1, L.ZONE, label_selector=LabelSelector((("app", "web"),))),)
    pods = [_pod(f"web-{i}", 3000, topology_spread=spread, host_ports=(HostPort(9100),)) for i in range(4)]
    for optimize in (True, False):
        result = _decide(pods, [_agent()], optimize=optimize)
        assert result.unschedulable == {}
        assert sorted(nc.instance_type.name for nc in result.new_nodeclaims) == ["c5.xlarge"] * 4
        assert all("c5.4xlarge" not in [t.name for t in nc.instance_types] for nc in result.new_nodeclaims)
        assert sorted(nc.zone for nc in result.new_nodeclaims) == ["us-east-1a"] * 2 + ["us-east-1b"] * 2


def test_pods_too_big_for_the_port_free_types_are_unschedulable_with_the_reason() -> None:
    # 9 vCPU only fits a c5.4xlarge, where the daemonset holds the port: no node, and the reason says why.
    result = _decide([_pod("big", 9000, host_ports=(HostPort(9100),))], [_agent()])
    assert result.new_nodeclaims == []
    assert result.unschedulable == {"default/big": 'incompatible with nodepool "default", host port 9100/TCP is taken '
                                                   "by daemonset kube-system/big-agent on every instance type large "
                                                   "enough for it"}
    # Too big for any type: the reason quotes the least and the most daemonset overhead of the pool's types.
    result = _decide([_pod("huge", 19000)], [_agent()])
    assert ("daemonset overhead=min={cpu: 0, memory: 0, pods: 0}, max={cpu: 1500m, memory: 1Gi, pods: 1}, no "
            "instance type satisfied resources {cpu: 19, memory: 1Gi, pods: 1}") in result.unschedulable["default/huge"]
    # Without the port it gets the c5.4xlarge, carrying the daemonset: 9000m + 1500m.
    (nc,) = _decide([_pod("big", 9000)], [_agent()]).new_nodeclaims
    assert nc.instance_type.name == "c5.4xlarge" and nc.requests["cpu"] == 10500
    assert nc.daemonset_overhead == {"cpu": 1500, "memory": GIB, "pods": 1}


def test_in_flight_nodes_reserve_the_daemonsets_they_will_run() -> None:
    """An in-flight c5.4xlarge (no DaemonSet pod yet) will run big-agent: its port and its 1500m are taken; an
    in-flight c5.xlarge will not run it, so nothing is reserved there."""
    big = {t.name: t for t in TYPES}["c5.4xlarge"]
    labels = {**big.labels, L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "on-demand", L.NODEPOOL: "default"}
    node = ExistingNode("inflight-big", dict(labels), dict(big.allocatable()), initialized=False)
    result = _decide([_pod("port", 1000, host_ports=(HostPort(9100),)), _pod("plain", 1000)], [_agent()], [node])
    assert [p.name for p in result.existing["inflight-big"]] == ["plain"]
    (nc,) = result.new_nodeclaims
    assert (nc.instance_type.name, [p.name for p in nc.pods]) == ("c5.xlarge", ["port"])
    # Room: 15890m allocatable - 1500m for the agent.
    free = big.allocatable()["cpu"] - 1500
    result = _decide([_pod("fits", free), _pod("one-more", 1)], [_agent(port=None)], [node])
    assert [p.name for p in result.existing["inflight-big"]] == ["fits"]


def test_initialized_nodes_keep_room_for_daemonsets_not_running_yet() -> None:
    """Karpenter v1.14 ``NewExistingNode``: an initialized c5.4xlarge (15890m) that big-agent should run on but does
    not yet keeps its 1500m; once the agent's pod is bound nothing more is held; an unexpected bigger DaemonSet pod
    never gives room back (clamped at 0). A c5.xlarge, where big-agent does not run, keeps nothing."""
    by_name = {t.name: t for t in TYPES}

    def node(type_name: str, pods: Sequence[Pod] = ()) -> ExistingNode:
        it = by_name[type_name]
        labels = {**it.labels, L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "on-demand", L.NODEPOOL: "default",
                  L.INITIALIZED: "true", L.REGISTERED: "true"}
        return ExistingNode(f"n-{type_name}", labels, dict(it.allocatable()), pods=list(pods))

    def where(cpu: int, n: ExistingNode) -> str:
        result = _decide([_pod("p", cpu)], [_agent(port=None)], [n])
        return "existing" if result.existing.get(n.name) else "new"

    big = by_name["c5.4xlarge"].allocatable()["cpu"]
    assert where(big - 1500, node("c5.4xlarge")) == "existing"
    assert where(big - 1499, node("c5.4xlarge")) == "new"
    running = dataclasses.replace(_agent(port=None), name="big-agent-n1", node_name="n-c5.4xlarge")
    assert where(big - 1500, node("c5.4xlarge", [running])) == "existing"
    assert where(big - 1499, node("c5.4xlarge", [running])) == "new"  # its own 1500m are in use
    other = Pod(namespace="kube-system", name="extra", requests={"cpu": 3000, "memory": GIB, "pods": 1},
                owner_kind="DaemonSet", owner_name="extra", node_name="n-c5.4xlarge")
    assert where(big - 3000, node("c5.4xlarge", [other])) == "existing"  # no 1500m held on top of its 3000m
    small = by_name["c5.xlarge"].allocatable()["cpu"]
    assert where(small, node("c5.xlarge")) == "existing"


def test_the_disruption_screen_counts_each_types_own_daemonsets() -> None:
    spec = nodepool_spec_from_model(POOL_DOC, [_agent()])
    frontier = dict(pool_frontier(Pool(name="default", spec=spec, instance_types=TYPES)))
    alloc = {t.name: t.allocatable() for t in TYPES}
    prices = {t.name: min(o.price for o in t.offerings if o.capacity_type == "on-demand") for t in TYPES}
    # The c5.xlarge keeps its whole allocatable (the agent does not run there); the c5.4xlarge loses 1500m / 1Gi.
    assert frontier[prices["c5.xlarge"]][0] == alloc["c5.xlarge"]["cpu"]
    big = alloc["c5.4xlarge"]
    assert frontier[prices["c5.4xlarge"]][:2] == (big["cpu"] - 1500, big["memory"] - GIB)


def test_the_scheduling_cache_keeps_each_types_daemonsets_and_sees_a_new_set() -> None:
    cache = SchedulingCache()
    spec = nodepool_spec_from_model(POOL_DOC)
    pods = [_pod("p", 3000)]

    def decide(daemonsets: list[Pod]) -> tuple[str, int]:
        (nc,) = schedule(pods, [], [spec], {"default": TYPES}, daemonsets=daemonsets, cache=cache).new_nodeclaims
        return nc.instance_type.name, nc.requests["cpu"]

    assert decide([_agent()]) == ("c5.xlarge", 3000)  # the agent runs only on the c5.4xlarge
    hits = cache.stats.hits
    assert decide([_agent()]) == ("c5.xlarge", 3000) and cache.stats.hits > hits  # the next batch reuses the types
    everywhere = Pod(namespace="kube-system", name="agent", requests={"cpu": 1500, "memory": GIB, "pods": 1},
                     owner_kind="DaemonSet", owner_name="agent")
    assert decide([everywhere]) == ("c5.2xlarge", 4500)  # same overhead sum, another DaemonSet set: rebuilt
