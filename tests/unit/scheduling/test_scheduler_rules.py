"""One test per scheduling rule, on hand-built instance types with exact expected values."""

from nodewright.scheduling import (
    Affinity,
    ExistingNode,
    HostPort,
    LabelSelector,
    PodAffinityTerm,
    Toleration,
    TopologySpreadConstraint,
    schedule,
)
from nodewright.scheduling.taints import Taint

from .helpers import GIB, MIB, make_type, pod, pool, standard_types

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def names(result):
    return sorted((nc.instance_type.name, len(nc.pods)) for nc in result.new_nodeclaims)


def test_candidates_ordered_by_cheapest_offering_and_cheapest_chosen() -> None:
    r = schedule([pod("a", 1500, 6 * 1024)], [], [pool()], {"default": standard_types()})
    (nc,) = r.new_nodeclaims
    assert [t.name for t in nc.instance_types] == ["m.large", "r.large", "c.xlarge", "m.xlarge", "r.xlarge", "c.2xlarge", "m.2xlarge"]
    assert nc.instance_type.name == "m.large" and nc.price == 0.096 and nc.zone == "test-1a"


def test_taint_must_be_tolerated() -> None:
    tainted = pool(taints=(Taint("team", "NoSchedule"),))
    r = schedule([pod("a", 100, 100)], [], [tainted], {"default": standard_types()})
    assert r.unschedulable == {"default/a": 'incompatible with nodepool "default", did not tolerate taint team:NoSchedule'}
    r = schedule([pod("a", 100, 100, tolerations=(Toleration("team", "Exists"),))], [], [tainted], {"default": standard_types()})
    assert names(r) == [("c.large", 1)]


def test_prefer_no_schedule_pool_used_after_relaxation() -> None:
    soft = pool("soft", taints=(Taint("x", "PreferNoSchedule"),))
    r = schedule([pod("a", 100, 100)], [], [soft], {"soft": standard_types()})
    assert names(r) == [("c.large", 1)]
    assert any(e.message.endswith("adding: toleration for PreferNoSchedule taints") for e in r.events)


def test_nodepool_weight_then_name_order() -> None:
    pools = [pool("b-low", weight=1), pool("a-high", weight=50), pool("c-none")]
    r = schedule([pod("a", 100, 100)], [], pools, {p.name: standard_types() for p in pools})
    assert r.new_nodeclaims[0].nodepool == "a-high"


def test_node_selector_on_custom_pool_label() -> None:
    pools = [pool("gen", weight=10), pool("team", labels={"team": "a"})]
    r = schedule([pod("a", 100, 100, node_selector={"team": "a"})], [], pools, {p.name: standard_types() for p in pools})
    assert r.new_nodeclaims[0].nodepool == "team" and r.new_nodeclaims[0].labels["team"] == "a"


def test_required_node_affinity_or_terms_relax_first_term() -> None:
    from nodewright.scheduling import NodeSelectorTerm

    aff = Affinity(
        node_required=(
            NodeSelectorTerm((("karpenter.k8s.aws/instance-family", "In", ("x",)),)),
            NodeSelectorTerm((("karpenter.k8s.aws/instance-family", "In", ("r",)),)),
        )
    )
    r = schedule([pod("a", 100, 100, affinity=aff)], [], [pool()], {"default": standard_types()})
    assert names(r) == [("r.large", 1)]
    assert any("requiredDuringSchedulingIgnoredDuringExecution[0]" in e.message for e in r.events)


def test_daemonset_overhead_added_to_requests() -> None:
    p = pool(overhead={"cpu": 500, "memory": 512 * MIB, "pods": 2})
    r = schedule([pod("a", 1600, 1024)], [], [p], {"default": standard_types()})
    (nc,) = r.new_nodeclaims
    # 1600m + 500m exceeds a 2-vCPU type: the smallest fitting is a 4-vCPU c.xlarge.
    assert nc.instance_type.name == "c.xlarge"
    assert nc.requests == {"cpu": 2100, "memory": 1536 * MIB, "pods": 3}


def test_limits_exclude_types_and_log() -> None:
    p = pool(limits={"cpu": 4000})
    r = schedule([pod("a", 1000, 1024)], [], [p], {"default": standard_types()})
    assert "2 out of 8 instance types were excluded because they would breach limits" in [e.message for e in r.events]
    assert all(t.capacity["cpu"] <= 4000 for t in r.new_nodeclaims[0].instance_types)


def test_limits_exhausted_reports_reason() -> None:
    p = pool(limits={"cpu": 2000})
    r = schedule([pod(f"p{i}", 1500, 1024) for i in range(2)], [], [p], {"default": standard_types()})
    assert len(r.new_nodeclaims) == 1
    assert r.unschedulable == {"default/p1": 'all available instance types exceed limits for nodepool: "default"'}


def test_existing_nodes_before_new_nodeclaims() -> None:
    node = ExistingNode("n1", {ZONE: "test-1a"}, {"cpu": 1500, "memory": 4 * GIB, "pods": 10})
    r = schedule([pod("a", 1000, 1024), pod("b", 1000, 1024)], [node], [pool()], {"default": standard_types()})
    assert [p.name for p in r.existing["n1"]] == ["a"]
    assert names(r) == [("c.large", 1)]


def test_cordoned_and_tainted_existing_nodes_skipped() -> None:
    cordoned = ExistingNode("n1", {}, {"cpu": 8000, "memory": 8 * GIB, "pods": 10}, unschedulable=True)
    tainted = ExistingNode("n2", {}, {"cpu": 8000, "memory": 8 * GIB, "pods": 10}, taints=(Taint("k", "NoExecute"),))
    r = schedule([pod("a", 100, 100)], [cordoned, tainted], [pool()], {"default": standard_types()})
    assert r.existing == {} and len(r.new_nodeclaims) == 1


def test_zone_spread_splits_across_zones_with_skew_one() -> None:
    tsc = TopologySpreadConstraint(1, ZONE, label_selector=LabelSelector((("app", "w"),)))
    pods = [pod(f"w{i}", 1000, 256, labels={"app": "w"}, topology_spread=(tsc,)) for i in range(4)]
    r = schedule(pods, [], [pool()], {"default": standard_types()})
    per_zone = {}
    for nc in r.new_nodeclaims:
        per_zone[nc.zone] = per_zone.get(nc.zone, 0) + len(nc.pods)
    assert per_zone == {"test-1a": 2, "test-1b": 2}


def test_hostname_anti_affinity_one_per_node() -> None:
    aff = Affinity(pod_anti_affinity_required=(PodAffinityTerm(HOST, LabelSelector((("app", "db"),))),))
    pods = [pod(f"d{i}", 100, 100, labels={"app": "db"}, affinity=aff) for i in range(3)]
    r = schedule(pods, [], [pool()], {"default": standard_types()})
    assert names(r) == [("c.large", 1)] * 3


def test_anti_affinity_counts_pods_on_existing_nodes() -> None:
    aff = Affinity(pod_anti_affinity_required=(PodAffinityTerm(ZONE, LabelSelector((("app", "db"),))),))
    bound = pod("old", 100, 100, labels={"app": "db"}, node_name="n1")
    node = ExistingNode("n1", {ZONE: "test-1a"}, {"cpu": 4000, "memory": 8 * GIB, "pods": 10}, pods=[bound])
    r = schedule([pod("new", 100, 100, labels={"app": "db"}, affinity=aff)], [node], [pool()], {"default": standard_types()})
    assert r.existing == {} and r.new_nodeclaims[0].zone == "test-1b"


def test_zone_pod_affinity_follows_existing_pod() -> None:
    aff = Affinity(pod_affinity_required=(PodAffinityTerm(ZONE, LabelSelector((("app", "cache"),))),))
    bound = pod("cache", 100, 100, labels={"app": "cache"}, node_name="n1")
    node = ExistingNode("n1", {ZONE: "test-1b"}, {"cpu": 200, "memory": GIB, "pods": 10}, pods=[bound])
    r = schedule([pod("web", 1000, 100, affinity=aff)], [node], [pool()], {"default": standard_types()})
    assert r.new_nodeclaims[0].zone == "test-1b"


def test_preferred_anti_affinity_relaxed_when_unsatisfiable() -> None:
    from nodewright.scheduling import WeightedPodAffinityTerm

    term = WeightedPodAffinityTerm(100, PodAffinityTerm(ZONE, LabelSelector((("app", "x"),))))
    aff = Affinity(pod_anti_affinity_preferred=(term,))
    pods = [pod(f"x{i}", 100, 100, labels={"app": "x"}, affinity=aff) for i in range(3)]
    r = schedule(pods, [], [pool()], {"default": standard_types()})
    assert r.unschedulable == {} and sum(len(nc.pods) for nc in r.new_nodeclaims) == 3
    assert any(
        "removing: spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]" in e.message
        for e in r.events
    )


def test_host_port_conflict_forces_second_node() -> None:
    port = (HostPort(8080),)
    r = schedule([pod("a", 100, 100, host_ports=port), pod("b", 100, 100, host_ports=port)], [], [pool()], {"default": standard_types()})
    assert names(r) == [("c.large", 1), ("c.large", 1)]


def test_spot_preferred_over_on_demand_when_both_allowed() -> None:
    types = [make_type("m.large", 2, 8, 0.096, spot=0.035)]
    r = schedule([pod("a", 100, 100)], [], [pool()], {"default": types})
    assert r.new_nodeclaims[0].capacity_type == "spot" and r.new_nodeclaims[0].price == 0.035
    od = pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    r = schedule([pod("a", 100, 100)], [], [od], {"default": types})
    assert r.new_nodeclaims[0].capacity_type == "on-demand" and r.new_nodeclaims[0].price == 0.096


def test_target_utilization_sizes_nodes_larger() -> None:
    pods = [pod(f"p{i}", 900, 512) for i in range(2)]
    full = schedule(pods, [], [pool()], {"default": standard_types()})
    assert names(full) == [("c.large", 2)]
    eighty = schedule(pods, [], [pool(target_utilization=0.8)], {"default": standard_types()})
    # 1800m > 0.8 x 2000m: the pods need a 4-vCPU node (or two 2-vCPU ones at the same price).
    assert eighty.total_price == 0.17
    for nc in eighty.new_nodeclaims:
        assert nc.requests["cpu"] <= 0.8 * nc.instance_type.capacity["cpu"]


def test_cost_optimal_packing_beats_one_big_node() -> None:
    # Karpenter's greedy would put all 5 pods on one node of the only type holding them (big: $1.00);
    # two small nodes ($0.30 each) hold them for $0.60.
    types = [make_type("s.large", 4, 16, 0.30), make_type("b.4xlarge", 16, 64, 1.00)]
    pods = [pod(f"p{i}", 1500, 1024) for i in range(5)]
    greedy = schedule(pods, [], [pool()], {"default": types}, optimize=False)
    assert names(greedy) == [("b.4xlarge", 5)] and greedy.total_price == 1.00
    best = schedule(pods, [], [pool()], {"default": types})
    assert names(best) == [("s.large", 2), ("s.large", 2), ("s.large", 1)] or best.total_price <= 0.90
    assert round(best.total_price, 2) == 0.90


def test_min_values_keeps_enough_families() -> None:
    p = pool(requirements=[{"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 3}])
    r = schedule([pod("a", 100, 100)], [], [p], {"default": standard_types()})
    families = {t.labels["karpenter.k8s.aws/instance-family"] for t in r.new_nodeclaims[0].instance_types}
    assert families == {"c", "m", "r"}


def test_max_new_nodeclaims_for_consolidation() -> None:
    pods = [pod(f"p{i}", 1500, 1024) for i in range(3)]
    r = schedule(pods, [], [pool()], {"default": standard_types()}, max_new_nodeclaims=1)
    assert names(r) == [("c.xlarge", 2)] or names(r) == [("c.2xlarge", 3)]
    assert names(r) == [("c.2xlarge", 3)] and r.unschedulable == {}
    none = schedule(pods, [], [pool()], {"default": standard_types()}, max_new_nodeclaims=0)
    assert none.new_nodeclaims == [] and len(none.unschedulable) == 3


def test_log_sentences() -> None:
    r = schedule([pod("a", 1000, 1024)], [], [pool()], {"default": standard_types()})
    assert [e.message for e in r.events] == [
        "Found 1 provisionable pod(s)",
        "Computed 1 new node(s) will fit 1 pod(s)",
        "Launching node with 1 pods requesting {cpu: 1, memory: 1Gi, pods: 1} from types c.large, m.large, r.large, "
        "c.xlarge, m.xlarge and 3 other(s)",
    ]


def test_deterministic_output() -> None:
    pods = [pod(f"p{i}", 300 + 100 * (i % 5), 256 * (1 + i % 3)) for i in range(40)]
    a = schedule(pods, [], [pool()], {"default": standard_types()})
    b = schedule(pods, [], [pool()], {"default": standard_types()})
    assert [(nc.instance_type.name, [p.name for p in nc.pods]) for nc in a.new_nodeclaims] == [
        (nc.instance_type.name, [p.name for p in nc.pods]) for nc in b.new_nodeclaims
    ]
