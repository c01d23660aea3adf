"""Property tests: the invariants every plan must keep, on random inputs."""

from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from nodewright.scheduling import LabelSelector, Toleration, TopologySpreadConstraint, schedule, scheduler
from nodewright.scheduling.repack import repack_topology
from nodewright.scheduling.taints import Taint

from .helpers import pod, pool, standard_types

ZONE = "topology.kubernetes.io/zone"
SPREAD = TopologySpreadConstraint(1, ZONE, label_selector=LabelSelector((("app", "s"),)))

pod_spec = st.tuples(
    st.integers(min_value=50, max_value=6000),  # cpu m
    st.integers(min_value=64, max_value=20000),  # memory MiB
    st.booleans(),  # zone spread
    st.booleans(),  # tolerates the tainted pool
)


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(pod_spec, min_size=1, max_size=40), cpu_limit=st.sampled_from([None, 16000, 64000]))
def test_plan_invariants(specs: list[tuple[int, int, bool, bool]], cpu_limit: int | None) -> None:
    pods = []
    for i, (cpu, mem, spread, tol) in enumerate(specs):
        kw: dict[str, object] = {}
        if spread:
            kw["labels"] = {"app": "s"}
            kw["topology_spread"] = (SPREAD,)
        if tol:
            kw["tolerations"] = (Toleration("dedicated", "Exists"),)
        pods.append(pod(f"p{i}", cpu, mem, **kw))
    pools = [
        pool("tainted", weight=10, taints=(Taint("dedicated", "NoSchedule"),)),
        pool("general", limits={"cpu": cpu_limit} if cpu_limit else None),
    ]
    types = {p.name: standard_types() for p in pools}
    result = schedule(pods, [], pools, types)
    again = schedule(pods, [], pools, types)
    # Deterministic.
    assert [(n.instance_type.name, [p.name for p in n.pods]) for n in result.new_nodeclaims] == [
        (n.instance_type.name, [p.name for p in n.pods]) for n in again.new_nodeclaims
    ]
    # Every pod is either placed once or reported.
    placed = [p.key for n in result.new_nodeclaims for p in n.pods]
    assert len(placed) == len(set(placed))
    assert sorted(placed + list(result.unschedulable)) == sorted(p.key for p in pods)
    used_cpu = 0
    for nc in result.new_nodeclaims:
        # No node over allocatable: every candidate type holds the requests.
        for it in nc.instance_types:
            alloc = it.allocatable()
            assert all(qty <= alloc.get(name, 0) for name, qty in nc.requests.items())
        # No taint violated.
        for p in nc.pods:
            assert all(any(t.tolerates(taint) for t in p.tolerations) for taint in nc.taints)
        if nc.nodepool == "general":
            used_cpu += max(it.capacity["cpu"] for it in nc.instance_types)
    # No limit breached (largest candidate of each launch counted).
    if cpu_limit:
        assert used_cpu <= cpu_limit
    # Required zone spread kept (maxSkew 1 over the zones used by spread pods).
    per_zone = {"test-1a": 0, "test-1b": 0}
    for nc in result.new_nodeclaims:
        per_zone[nc.zone] += sum(1 for p in nc.pods if p.labels.get("app") == "s")
    assert abs(per_zone["test-1a"] - per_zone["test-1b"]) <= 1


HOST = "kubernetes.io/hostname"
KINDS = ("zone-spread", "host-spread", "host-anti", "host-affinity", "zone-affinity", "plain")


def _topology_pod(i: int, kind: str, cpu: int, mem: int, port: bool) -> object:
    from nodewright.scheduling import Affinity, PodAffinityTerm
    from nodewright.scheduling.pods import HostPort

    sel = LabelSelector((("app", kind),))
    kw: dict[str, object] = {"labels": {"app": kind}}
    if kind == "zone-spread":
        kw["topology_spread"] = (TopologySpreadConstraint(1, ZONE, label_selector=sel, min_domains=2),)
    elif kind == "host-spread":
        kw["topology_spread"] = (TopologySpreadConstraint(2, HOST, label_selector=sel),)
    elif kind == "host-anti":
        kw["affinity"] = Affinity(pod_anti_affinity_required=(PodAffinityTerm(HOST, sel),))
    elif kind == "host-affinity":
        kw["affinity"] = Affinity(pod_affinity_required=(PodAffinityTerm(HOST, sel),))
    elif kind == "zone-affinity":
        kw["affinity"] = Affinity(pod_affinity_required=(PodAffinityTerm(ZONE, sel),))
    if port:
        kw["host_ports"] = (HostPort(8080, "TCP", ""),)
    return pod(f"{kind}-{i}", cpu, mem, **kw)


topo_spec = st.tuples(
    st.sampled_from(KINDS),
    st.integers(min_value=100, max_value=3000),  # cpu m
    st.integers(min_value=64, max_value=6000),  # memory MiB
    st.booleans(),  # host port 8080
)


@settings(max_examples=40, deadline=None)
@given(specs=st.lists(topo_spec, min_size=1, max_size=30), cpu_limit=st.sampled_from([None, 24000]))
def test_topology_plan_invariants_after_repack(specs: list[tuple[str, int, int, bool]], cpu_limit: int | None) -> None:
    """Random zone/hostname spread, (anti-)affinity and host-port pods: the re-packed plan breaks none of them,
    costs at most the plan it re-packs, and is deterministic."""
    pods = [_topology_pod(i, kind, cpu, mem, port) for i, (kind, cpu, mem, port) in enumerate(specs)]
    pools = [pool("general", limits={"cpu": cpu_limit} if cpu_limit else None)]
    types = {"general": standard_types()}
    result = schedule(pods, [], pools, types)  # type: ignore[arg-type]
    again = schedule(pods, [], pools, types)  # type: ignore[arg-type]
    assert [(n.instance_type.name, n.zone, [p.name for p in n.pods]) for n in result.new_nodeclaims] == [
        (n.instance_type.name, n.zone, [p.name for p in n.pods]) for n in again.new_nodeclaims
    ]
    placed = [p.key for n in result.new_nodeclaims for p in n.pods]
    assert sorted(placed + list(result.unschedulable)) == sorted(p.key for p in pods)  # type: ignore[attr-defined]
    # The re-pack never raises the price of the plan it starts from (the same run without it). Not compared
    # with optimize=False: taking free pods out of the loop changes the loop's own placements.
    without_repack = tuple(stage for stage in scheduler.OPTIMIZED if stage is not repack_topology)
    with patch.object(scheduler, "OPTIMIZED", without_repack):
        before = schedule(pods, [], pools, types)  # type: ignore[arg-type]
    if sorted(before.unschedulable) == sorted(result.unschedulable):
        assert result.total_price <= before.total_price + 1e-9
    per_zone: dict[str, dict[str, int]] = {}
    used_cpu = 0
    for nc in result.new_nodeclaims:
        for it in nc.instance_types:
            alloc = it.allocatable()
            assert all(qty <= alloc.get(name, 0) for name, qty in nc.requests.items())
        used_cpu += max(it.capacity["cpu"] for it in nc.instance_types)
        apps = [p.labels["app"] for p in nc.pods]
        assert apps.count("host-spread") <= 2  # maxSkew 2, hostname minimum 0
        assert apps.count("host-anti") <= 1
        ports = [hp for p in nc.pods for hp in p.host_ports]
        assert len(ports) == len(set(ports))  # no host-port conflict
        for app in apps:
            per_zone.setdefault(app, {}).setdefault(nc.zone, 0)
            per_zone[app][nc.zone] += 1
    if cpu_limit:
        assert used_cpu <= cpu_limit
    # Hostname affinity: every such pod shares its node with all other host-affinity pods (self-selecting).
    hosts = {nc.hostname for nc in result.new_nodeclaims for p in nc.pods if p.labels["app"] == "host-affinity"}
    assert len(hosts) <= 1
    assert len(per_zone.get("zone-affinity", {})) <= 1
    spread = per_zone.get("zone-spread", {})
    if spread:
        counts = [spread.get(z, 0) for z in ("test-1a", "test-1b")]
        assert max(counts) - min(counts) <= 1


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(pod_spec, min_size=1, max_size=30))
def test_optimized_plan_never_costs_more_than_karpenter_greedy(specs: list[tuple[int, int, bool, bool]]) -> None:
    """Beyond Karpenter, never behind it: the optimized plan places at least as many pods as the greedy
    (Karpenter-style) plan, and at most its USD/hour when it places the same number."""
    pods = []
    for i, (cpu, mem, spread, tol) in enumerate(specs):
        kw: dict[str, object] = {}
        if spread:
            kw["labels"] = {"app": "s"}
            kw["topology_spread"] = (SPREAD,)
        if tol:
            kw["tolerations"] = (Toleration("dedicated", "Exists"),)
        pods.append(pod(f"p{i}", cpu, mem, **kw))
    pools = [pool("tainted", weight=10, taints=(Taint("dedicated", "NoSchedule"),)), pool("general")]
    types = {p.name: standard_types() for p in pools}
    optimized = schedule(pods, [], pools, types)
    greedy = schedule(pods, [], pools, types, optimize=False)
    assert optimized.scheduled_pod_count() >= greedy.scheduled_pod_count()
    if optimized.scheduled_pod_count() == greedy.scheduled_pod_count():
        assert optimized.total_price <= greedy.total_price + 1e-9


def test_schedule_logs_nothing_and_returns_the_events_of_its_plan(caplog) -> None:  # type: ignore[no-untyped-def]
    """schedule() may compute two plans; it logs nothing and returns one set of Karpenter's sentences, those of
    the plan it returns (the provisioner logs them)."""
    import logging

    pods = [pod(f"p{i}", 500, 512) for i in range(3)]
    pools = [pool("general")]
    with caplog.at_level(logging.DEBUG):
        result = schedule(pods, [], pools, {"general": standard_types()})
    assert caplog.records == []
    assert [e.message for e in result.events] == [
        "Found 3 provisionable pod(s)",
        "Computed 1 new node(s) will fit 3 pod(s)",
        "Launching node with 3 pods requesting {cpu: 1500m, memory: 1536Mi, pods: 3} from types c.large, m.large, "
        "r.large, c.xlarge, m.xlarge and 3 other(s)",
    ]
