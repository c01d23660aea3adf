"""Karpenter ``scheduling/topology_test.go``: Describe "Topology" (spread, pod affinity and anti-affinity,
taints) and "Topology with Volume Requirements".

Karpenter's multi-round tests (provision, then provision more against the nodes just made) are chained with
:meth:`Decision.as_cluster`, which turns a decision's NodeClaims into Nodes with their pods bound. The default
NodePool allows both capacity types (Karpenter's ``capacity-type Exists``) and zones us-east-1a/b/c.
"""

from __future__ import annotations

import pytest

from .kit import (
    APP,
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    Z1,
    Z2,
    Z3,
    ZONE,
    ZONES,
    affinity_term,
    claim_volume,
    expr,
    namespace,
    node,
    nodepool,
    persistent_volume,
    pod,
    pods,
    pvc,
    req,
    run,
    spread,
    taint,
    toleration,
)

S2 = {"security": "s2"}
ALL_CT = [req(CAPACITY_TYPE, "Exists")]


def pool(**kw):
    kw.setdefault("requirements", ALL_CT)
    return nodepool(**kw)


def spread_pods(count: int, prefix: str, *constraints, **kw):
    return pods(count, prefix, labels=kw.pop("labels", APP), spreads=list(constraints) or [spread(ZONE)], **kw)


# Describe("Topology")


def test_unknown_topology_key():
    # It("should ignore unknown topology keys")
    a = pod("a", labels=APP, spreads=[spread("unknown")])
    d = run(pool(), a, pod("b"))
    assert "default/a" in d.unschedulable and d.scheduled("b")


def test_nil_label_selector_does_not_spread():
    # It("should not spread when a nil label selector is defined")
    d = run(pool(), spread_pods(2, "s", spread(ZONE, labels=None)))
    assert d.skew(ZONE) == [2]


# Context("Zonal")


def test_zonal_match_labels():
    # It("should balance pods across zones (match labels)")
    d = run(pool(), spread_pods(4, "s"))
    assert d.skew(ZONE) == [2, 1, 1]


def test_zonal_match_expressions():
    # It("should balance pods across zones (match expressions)")
    sel = {"matchExpressions": [{"key": "test", "operator": "In", "values": ["test"]}]}
    d = run(pool(), spread_pods(4, "s", spread(ZONE, selector=sel)))
    assert d.skew(ZONE) == [2, 1, 1]


def test_zonal_nodepool_zones():
    # It("should respect NodePool zonal constraints")
    d = run(pool(requirements=[*ALL_CT, req(ZONE, "In", Z1, Z2, Z3)]), spread_pods(4, "s"))
    assert d.skew(ZONE) == [2, 1, 1]


def test_zonal_nodepool_zone_subset_requirements():
    # It("should respect NodePool zonal constraints (subset) with requirements")
    d = run(pool(zones=[Z1, Z2]), spread_pods(4, "s"))
    assert d.skew(ZONE) == [2, 2]


def test_zonal_nodepool_zone_subset_labels():
    # It("should respect NodePool zonal constraints (subset) with labels")
    d = run(pool(labels={ZONE: Z1}), spread_pods(4, "s"))
    assert d.skew(ZONE) == [4]


def test_zonal_nodepool_zone_subset_requirements_and_labels():
    # It("should respect NodePool zonal constraints (subset) with requirements and labels")
    d = run(pool(zones=[Z1, Z2], labels={ZONE: Z1}), spread_pods(4, "s"))
    assert d.skew(ZONE) == [4]


def test_zonal_nodepool_zone_labels_across_pools():
    # It("should respect NodePool zonal constraints (subset) with labels across NodePools")
    d = run(pool(zones=[Z1, Z2], labels={ZONE: Z1}), pool(name="second", labels={ZONE: Z2}), spread_pods(4, "s"))
    assert d.skew(ZONE) == [2, 2]


def test_zonal_existing_pod():
    # It("should respect NodePool zonal constraints (existing pod)")
    """A labelled pod already runs in zone 3, where the pool can no longer launch: zones 1 and 2 take two each."""
    d = run(pool(zones=[Z1, Z2]), node("n3", zone=Z3, instance_type="c5.large"), pod("old", labels=APP, cpu="1.1", node_name="n3"),
            spread_pods(6, "s", cpu="1.1"))
    assert d.skew(ZONE) == [2, 2, 1]
    assert len(d.unschedulable) == 2


def test_zonal_non_minimum_domain_if_only_one():
    # It("should schedule to the non-minimum domain if its all that's available")
    state = [node("n1", zone=Z1, instance_type="c5.large"), node("n2", zone=Z2, instance_type="c5.large"),
             pod("o1", labels=APP, cpu="1.1", node_name="n1"), pod("o2", labels=APP, cpu="1.1", node_name="n2")]
    d = run(pool(zones=[Z3]), state, spread_pods(10, "s", spread(ZONE, 5), cpu="1.1"))
    assert d.skew(ZONE) == [6, 1, 1]


def test_zonal_only_minimum_domains_when_violating():
    # It("should only schedule to minimum domains if already violating max skew")
    state = [node("n1", zone=Z1), node("n2", zone=Z2), node("n3", zone=Z3)]
    bound = [pod(f"o{i}", labels=APP, cpu="1.1", node_name="n1") for i in range(3)]
    d = run(pool(), state, bound, spread_pods(3, "s", cpu="1.1"))
    assert d.skew(ZONE) == [3, 2, 1]


def test_zonal_do_not_schedule_max_skew():
    # It("should not violate max-skew when unsat = do not schedule")
    d = run(pool(zones=[Z2, Z3]), node("n1", zone=Z1, instance_type="c5.large"), pod("o", labels=APP, cpu="1.1", node_name="n1",
                                                            spreads=[spread(ZONE)]),
            spread_pods(10, "s", cpu="1.1"))
    assert d.skew(ZONE) == [2, 2, 1]


def test_zonal_do_not_schedule_max_skew_discover_domains():
    # It("should not violate max-skew when unsat = do not schedule (discover domains)")
    """The zone-1 pod has no spread of its own; zone 1 is still a domain because a node is there."""
    d = run(pool(zones=[Z2, Z3]), node("n1", zone=Z1, instance_type="c5.large"), pod("o", labels=APP, cpu="1.1", node_name="n1"),
            spread_pods(10, "s", cpu="1.1"))
    assert d.skew(ZONE) == [2, 2, 1]


def _counting_scenario(key: str, domains: tuple[str, str]) -> list:
    """Karpenter's "only count running/scheduled pods" cluster: two nodes with a ``key`` domain each and one
    without, bound pods that must not count (no labels, no domain, other namespace, terminating, Failed,
    Succeeded) and three that do (two on the first node, one on the second)."""
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    nodes = [node(f"n{i}", instance_type=None, nodepool_name=None, zone=None, capacity_type=None, allocatable=alloc,
                  labels={key: dom} if dom else None) for i, dom in enumerate([*domains, None], 1)]
    ignored = [
        pod("no-labels", node_name="n1"),
        pod("no-domain", labels=APP, node_name="n3"),
        pod("other-ns", labels=APP, node_name="n1", namespace="elsewhere"),
        pod("terminating", labels=APP, deleting=True),
        pod("failed", labels=APP, node_name="n1", phase="Failed"),
        pod("succeeded", labels=APP, node_name="n1", phase="Succeeded"),
    ]
    counted = [pod("r1", labels=APP, node_name="n1"), pod("r2", labels=APP, node_name="n1"),
               pod("r3", labels=APP, node_name="n2")]
    return [namespace("elsewhere"), *nodes, *ignored, *counted]


def test_zonal_counts_only_running_matching_pods():
    # It("should only count running/scheduled pods with matching labels scheduled to nodes with a corresponding domain")
    d = run(pool(), _counting_scenario(ZONE, (Z1, Z2)), spread_pods(2, "s"))
    assert d.skew(ZONE) == [2, 2, 1]


@pytest.mark.parametrize("key", [ZONE, CAPACITY_TYPE])
def test_no_selector_matches_all(key):
    # It("should match all pods when labelSelector is not specified")  (Context "Zonal" and Context "CapacityType")
    d = run(pool(), pod("p"))
    assert d.skew(key, labels=None) == [1]


def test_interdependent_selectors():
    # It("should handle interdependent selectors")  (Context "Zonal" and Context "CapacityType", same body)
    """No pod carries the selected labels, so the spread never binds: one node holds them all."""
    ps = pods(5, "s", spreads=[spread(HOSTNAME)])
    d = run(pool(), ps)
    assert d.node_count(ps) == 1


def test_zonal_min_domains_unsatisfiable():
    # It("should respect minDomains constraints")
    d = run(pool(zones=[Z1, Z2]), spread_pods(3, "s", spread(ZONE, min_domains=3)))
    assert d.skew(ZONE) == [1, 1]


def test_zonal_min_domains_equal():
    # It("satisfied minDomains constraints (equal) should allow expected pod scheduling")
    d = run(pool(), spread_pods(11, "s", spread(ZONE, min_domains=3)))
    assert d.skew(ZONE) == [4, 4, 3]


def test_zonal_min_domains_greater():
    # It("satisfied minDomains constraints (greater than minimum) should allow expected pod scheduling")
    d = run(pool(), spread_pods(11, "s", spread(ZONE, min_domains=2)))
    assert d.skew(ZONE) == [4, 4, 3]


# Context("Hostname")


def test_hostname_balance():
    # It("should balance pods across nodes")
    d = run(pool(), spread_pods(4, "s", spread(HOSTNAME)))
    assert d.skew(HOSTNAME) == [1, 1, 1, 1]


def test_hostname_up_to_max_skew():
    # It("should balance pods on the same hostname up to maxskew")
    d = run(pool(), spread_pods(4, "s", spread(HOSTNAME, 4)))
    assert d.skew(HOSTNAME) == [4]


def _app_spread(app: str, **kw):
    return pods(2, app, labels={"app": app}, spreads=[spread(HOSTNAME, labels={"app": app})], **kw)


def test_hostname_multiple_deployments():
    # It("balance multiple deployments with hostname topology spread")
    ps = _app_spread("app1") + _app_spread("app2")
    d = run(pool(), ps)
    assert all(d.scheduled(p) for p in ps) and len(d.claims) == 2


def test_hostname_multiple_deployments_varying_arch():
    # It("balance multiple deployments with hostname topology spread & varying arch")
    ps = _app_spread("app1", required=[expr(ARCH, "In", "amd64")]) + _app_spread("app2", required=[expr(ARCH, "In", "arm64")])
    d = run(pool(), ps)
    assert all(d.scheduled(p) for p in ps) and len(d.claims) == 4


# Context("CapacityType")


def test_capacity_type_balance():
    # It("should balance pods across capacity types")
    d = run(pool(), spread_pods(4, "s", spread(CAPACITY_TYPE)))
    assert d.skew(CAPACITY_TYPE) == [2, 2]


def test_capacity_type_nodepool_constraints():
    # It("should respect NodePool capacity type constraints")
    d = run(pool(requirements=[req(CAPACITY_TYPE, "In", "spot", "on-demand")]), spread_pods(4, "s", spread(CAPACITY_TYPE)))
    assert d.skew(CAPACITY_TYPE) == [2, 2]


def _spot_node_with_pod(spread_when: str = "DoNotSchedule"):
    return [node("n1", capacity_type="spot", instance_type="c5.large"),
            pod("o", labels=APP, cpu="1.1", node_name="n1", spreads=[spread(CAPACITY_TYPE, when=spread_when)])]


def test_capacity_type_do_not_schedule():
    # It("should not violate max-skew when unsat = do not schedule (capacity type)")
    d = run(pool(requirements=[req(CAPACITY_TYPE, "In", "on-demand")]), _spot_node_with_pod(),
            spread_pods(5, "s", spread(CAPACITY_TYPE), cpu="1.1"))
    assert d.skew(CAPACITY_TYPE) == [2, 1]


def test_capacity_type_schedule_anyway():
    # It("should violate max-skew when unsat = schedule anyway (capacity type)")
    d = run(pool(requirements=[req(CAPACITY_TYPE, "In", "on-demand")]), _spot_node_with_pod("ScheduleAnyway"),
            spread_pods(5, "s", spread(CAPACITY_TYPE, when="ScheduleAnyway"), cpu="1.1"))
    assert d.skew(CAPACITY_TYPE) == [5, 1]


def test_capacity_type_counts_only_running_matching_pods():
    # It("should only count running/scheduled pods with matching labels scheduled to nodes with a corresponding domain")
    d = run(pool(), _counting_scenario(CAPACITY_TYPE, ("spot", "on-demand")), spread_pods(2, "s", spread(CAPACITY_TYPE)))
    assert d.skew(CAPACITY_TYPE) == [3, 2]


def test_capacity_type_node_affinity_constrained():
    # It("should balance pods across capacity-types (node required affinity constrained)")
    """The zone-2/spot pods' node affinity excludes the zone-1 on-demand node from their spread."""
    state = [node("n1", zone=Z1, capacity_type="on-demand"), pod("o", labels=APP, node_name="n1")]
    new = spread_pods(5, "s", spread(CAPACITY_TYPE), required=[expr(ZONE, "In", Z2), expr(CAPACITY_TYPE, "In", "spot")])
    d = run(pool(), state, new)
    assert d.skew(CAPACITY_TYPE) == [5, 1]


def test_capacity_type_no_constraints_sees_existing():
    # It("should balance pods across capacity-types (no constraints)")
    state = [node("n1", capacity_type="on-demand", instance_type="c5.large"), pod("o", labels=APP, node_name="n1")]
    d = run(pool(requirements=[req(CAPACITY_TYPE, "In", "spot")]), state, spread_pods(5, "s", spread(CAPACITY_TYPE), cpu="2"))
    assert d.skew(CAPACITY_TYPE) == [2, 1]


def test_arch_no_constraints_sees_existing():
    # It("should balance pods across arch (no constraints)")
    state = [node("n1", instance_type="c5.large"), pod("o", labels=APP, node_name="n1")]
    d = run(pool(requirements=[*ALL_CT, req(ARCH, "In", "arm64")]), state, spread_pods(5, "s", spread(ARCH), cpu="2"))
    assert d.skew(ARCH) == [2, 1]


# Context("Combined Hostname and Zonal Topology")


def _rounds(pool_docs, sizes, constraints, check):
    """Provision ``sizes[i]`` more spread pods per round against the cluster the previous rounds left."""
    cluster: list = []
    for r, count in enumerate(sizes):
        d = run(pool_docs, cluster, spread_pods(count, f"r{r}", *constraints))
        check(r, d)
        cluster = d.as_cluster(prefix=f"r{r}")
    return cluster


def test_hostname_and_zonal():
    # It("should spread pods while respecting both constraints (hostname and zonal)")
    expected = [[1, 1], [2, 2, 1], [4, 3, 3], [7, 7, 7]]

    def check(r, d):
        assert d.skew(ZONE) == expected[r]
        assert max(d.skew(HOSTNAME)) <= 3

    _rounds(pool(), [2, 3, 5, 11], [spread(ZONE), spread(HOSTNAME, 3)], check)


def test_balance_across_nodepool_requirements():
    # It("should balance pods across NodePool requirements")
    key = "capacity.spread.4-1"
    spot = pool(name="spot", requirements=[req(CAPACITY_TYPE, "In", "spot"), req(key, "In", "2", "3", "4", "5")])
    od = pool(name="on-demand", requirements=[req(CAPACITY_TYPE, "In", "on-demand"), req(key, "In", "1")])
    ps = spread_pods(20, "s", spread(key))
    d = run(spot, od, ps)
    assert all(d.scheduled(p) for p in ps)
    assert d.skew(key) == [4, 4, 4, 4, 4]
    assert d.skew(CAPACITY_TYPE) == [16, 4]


def test_zonal_with_hostname_anyway_and_disabled_pool():
    # It("should spread pods while respecting both constraints")  (zone + hostname ScheduleAnyway, limited pool)
    """The zone-3 pool may launch nothing (cpu limit 0) but zone 3 is still a domain: one pod per zone fits."""
    blocked = pool(name="blocked", zones=[Z3], limits={"cpu": "0"})
    d = run(pool(zones=[Z1, Z2]), blocked, spread_pods(10, "s", spread(ZONE), spread(HOSTNAME, when="ScheduleAnyway")))
    assert d.skew(ZONE) == [1, 1]
    assert d.skew(HOSTNAME) == [1, 1]


def test_capacity_type_and_hostname():
    # It("should spread pods while respecting both constraints")  (capacity type + hostname)
    expected = [[1, 1], [3, 2], [5, 5], [11, 10]]

    def check(r, d):
        assert d.skew(CAPACITY_TYPE) == expected[r]
        assert max(d.skew(HOSTNAME)) <= 3

    _rounds(pool(), [2, 3, 5, 11], [spread(CAPACITY_TYPE), spread(HOSTNAME, 3)], check)


# Context("MatchLabelKeys")


def test_match_label_keys():
    # It("should support matchLabelKeys")
    c = spread(HOSTNAME, match_label_keys=["test-label"])
    ps = (pods(2, "a", labels={**APP, "test-label": "value-a"}, spreads=[c])
          + pods(2, "b", labels={**APP, "test-label": "value-b"}, spreads=[c]))
    d = run(pool(), ps)
    assert d.skew(HOSTNAME) == [2, 2]


def test_match_label_keys_unknown_label():
    # It("should ignore unknown labels specified in matchLabelKeys")
    d = run(pool(), spread_pods(4, "s", spread(HOSTNAME, match_label_keys=["test-label"])))
    assert d.skew(HOSTNAME) == [1, 1, 1, 1]


# Context("NodeTaintsPolicy")

SPREAD_LABEL = "fake-label"


def _tainted_nodes():
    t = [taint("taintname", "taintvalue")]
    alloc = {"cpu": "100m", "memory": "1Gi", "pods": "10"}
    return [node("n1", instance_type=None, nodepool_name=None, labels={SPREAD_LABEL: "foo"}, taints=t, allocatable=alloc),
            node("n2", instance_type=None, nodepool_name=None, labels={SPREAD_LABEL: "bar"}, taints=t, allocatable=alloc)]


def test_node_taints_policy_ignore():
    # It("should balance pods across a label (NodeTaintsPolicy=ignore)")
    d = run(pool(labels={SPREAD_LABEL: "baz"}), _tainted_nodes(),
            spread_pods(5, "s", spread(SPREAD_LABEL, node_taints_policy="Ignore"), cpu="1"))
    assert d.skew(SPREAD_LABEL) == [1]


def test_node_taints_policy_honor():
    # It("should balance pods across a label (NodeTaintsPolicy=honor)")
    d = run(pool(labels={SPREAD_LABEL: "baz"}), _tainted_nodes(),
            spread_pods(5, "s", spread(SPREAD_LABEL, node_taints_policy="Honor"), cpu="1"))
    assert d.skew(SPREAD_LABEL) == [5]


def _tainted_pool_pair():
    plain = pool(requirements=[*ALL_CT, req(SPREAD_LABEL, "In", "foo")])
    tainted = pool(name="tainted", taints=[taint("taint-key", "taint-value")],
                   requirements=[*ALL_CT, req(SPREAD_LABEL, "In", "bar")])
    return [plain, tainted]


def test_node_taints_policy_ignore_domains_from_nodepool():
    # It("should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=ignore)")
    d = run(_tainted_pool_pair(), spread_pods(2, "s", spread(SPREAD_LABEL, node_taints_policy="Ignore")))
    assert d.skew(SPREAD_LABEL) == [1]


def test_node_taints_policy_honor_domains_from_nodepool():
    # It("should balance pods across a label when discovered from the nodepool (NodeTaintsPolicy=honor)")
    d = run(_tainted_pool_pair(), spread_pods(2, "s", spread(SPREAD_LABEL, node_taints_policy="Honor")))
    assert d.skew(SPREAD_LABEL) == [2]


def test_node_taints_policy_honor_shared_domains():
    # It("should balance pods across a label when mutually exclusive NodePools (by taints) share domains (NodeTaintsPolicy=honor)")
    pools = [pool(name=f"np-{i}", taints=[taint("taint-key", f"nodepool-{i}")],
                  requirements=[*ALL_CT, req(SPREAD_LABEL, "In", *domains)])
             for i, domains in enumerate([("foo", "bar"), ("foo", "baz")])]
    c = spread(SPREAD_LABEL, node_taints_policy="Honor")
    ps = (spread_pods(2, "one", c, tolerations=[toleration("taint-key", "nodepool-0", "NoSchedule")])
          + spread_pods(4, "two", c, tolerations=[toleration("taint-key", "nodepool-1", "NoSchedule")]))
    d = run(pools, ps)
    assert d.skew(SPREAD_LABEL) == [3, 2, 1]


# Context("NodeAffinityPolicy")


def _mismatched_nodes():
    alloc = {"cpu": "100m", "memory": "1Gi", "pods": "10"}
    return [node(f"n{i}", instance_type=None, nodepool_name=None, allocatable=alloc,
                 labels={SPREAD_LABEL: dom, "selector": "mismatch"}) for i, dom in enumerate(["foo", "bar"])]


def test_node_affinity_policy_ignore():
    # It("should balance pods across a label (NodeAffinityPolicy=ignore)")
    d = run(pool(labels={SPREAD_LABEL: "baz", "selector": "value"}), _mismatched_nodes(),
            spread_pods(5, "s", spread(SPREAD_LABEL, node_affinity_policy="Ignore"), cpu="1",
                        node_selector={"selector": "value"}))
    assert d.skew(SPREAD_LABEL) == [1]


def test_node_affinity_policy_honor():
    # It("should balance pods across a label (NodeAffinityPolicy=honor)")
    d = run(pool(labels={SPREAD_LABEL: "baz", "selector": "value"}), _mismatched_nodes(),
            spread_pods(5, "s", spread(SPREAD_LABEL, node_affinity_policy="Honor"), cpu="1",
                        node_selector={"selector": "value"}))
    assert d.skew(SPREAD_LABEL) == [5]


# Context("Combined Zonal and Capacity Type Topology")


def test_zonal_and_capacity_type():
    # It("should spread pods while respecting both constraints")  (zone + capacity type)
    limits = [(1, 1), (3, 2), (5, 4), (11, 7)]

    def check(r, d):
        assert max(d.skew(CAPACITY_TYPE)) <= limits[r][0]
        assert max(d.skew(ZONE)) <= limits[r][1]

    _rounds(pool(), [2, 3, 3, 11], [spread(CAPACITY_TYPE), spread(ZONE)], check)


# Context("Combined Hostname, Zonal, and Capacity Type Topology")


def test_hostname_zonal_and_capacity_type():
    # It("should spread pods while respecting all constraints")
    """Karpenter adds 1..14 pods over fourteen rounds; six rounds keep the suite fast with the same checks."""
    constraints = [spread(CAPACITY_TYPE), spread(ZONE, 2), spread(HOSTNAME, 3)]

    def check(r, d):
        assert d.max_skew(CAPACITY_TYPE, domains=["spot", "on-demand"]) <= 1
        assert d.max_skew(ZONE, domains=ZONES) <= 2
        assert d.max_skew(HOSTNAME) <= 3
        assert not d.unschedulable

    _rounds(pool(), [1, 2, 3, 4, 5, 6], constraints, check)


# Context("Combined Zonal Topology and Node Affinity")


def test_zonal_limited_by_node_selector():
    # It("should limit spread options by nodeSelector")
    ps = spread_pods(5, "a", node_selector={ZONE: Z1}) + spread_pods(10, "b", node_selector={ZONE: Z2})
    d = run(pool(), ps)
    assert d.skew(ZONE) == [10, 5]


def test_zonal_limited_by_node_requirements():
    # It("should limit spread options by node requirements")
    d = run(pool(), spread_pods(10, "s", required=[expr(ZONE, "In", Z1, Z2)]))
    assert d.skew(ZONE) == [5, 5]


def test_zonal_limited_by_required_node_affinity():
    # It("should limit spread options by required node affinity")
    d1 = run(pool(), spread_pods(6, "a", required=[expr(ZONE, "In", Z1, Z2)]))
    assert d1.skew(ZONE) == [3, 3]
    d2 = run(pool(), d1.as_cluster("r1"), spread_pods(1, "b", required=[expr(ZONE, "In", Z2, Z3)]))
    assert d2.skew(ZONE) == [3, 3, 1]
    d3 = run(pool(), d2.as_cluster("r2"), spread_pods(5, "c"))
    assert d3.skew(ZONE) == [4, 4, 4]


def test_zonal_not_limited_by_preferred_node_affinity():
    # It("should not limit spread options by preferred node affinity")
    d = run(pool(), spread_pods(6, "s", prefer=[expr(ZONE, "In", Z1, Z2)]))
    assert d.skew(ZONE) == [2, 2, 2]


# Context("Combined Capacity Type Topology and Node Affinity")


def test_capacity_type_limited_by_node_selector():
    # It("should limit spread options by nodeSelector")  (capacity type)
    c = spread(CAPACITY_TYPE, when="ScheduleAnyway")
    ps = spread_pods(5, "a", c, node_selector={CAPACITY_TYPE: "spot"}) + spread_pods(5, "b", c, node_selector={CAPACITY_TYPE: "on-demand"})
    d = run(pool(), ps)
    assert d.skew(CAPACITY_TYPE) == [5, 5]


def test_capacity_type_limited_by_node_affinity():
    # It("should limit spread options by node affinity (capacity type)")
    c = spread(CAPACITY_TYPE)
    d1 = run(pool(), spread_pods(3, "a", c, required=[expr(CAPACITY_TYPE, "In", "spot")]))
    assert d1.skew(CAPACITY_TYPE) == [3]
    d2 = run(pool(), d1.as_cluster("r1"), spread_pods(1, "b", c, required=[expr(CAPACITY_TYPE, "In", "on-demand", "spot")]))
    assert d2.skew(CAPACITY_TYPE) == [3, 1]
    d3 = run(pool(), d2.as_cluster("r2"), spread_pods(5, "c", c))
    assert d3.skew(CAPACITY_TYPE) == [5, 4]


# Context("Pod Affinity/Anti-Affinity")


def test_empty_pod_affinity():
    # It("should schedule a pod with empty pod affinity and anti-affinity")
    d = run(pool(), pod("p", extra={"affinity": {"podAffinity": {}, "podAntiAffinity": {}}}))
    assert d.scheduled("p")


def _host_spread(count: int = 10):
    return spread_pods(count, "spread", spread(HOSTNAME))


def test_pod_affinity_hostname():
    # It("should respect pod affinity (hostname)")
    target = pod("target", labels=S2)
    follower = pod("follower", affinity=[affinity_term(HOSTNAME, S2)])
    d = run(pool(), _host_spread(), target, follower)
    assert d.same_node(target, follower)


def test_pod_affinity_arch():
    # It("should respect pod affinity (arch)")
    tsc = [spread(HOSTNAME, labels=S2)]
    a = pod("a", labels=S2, spreads=tsc, cpu="2", node_selector={ARCH: "arm64"})
    b = pod("b", labels=S2, spreads=tsc, cpu="1", affinity=[affinity_term(ARCH, S2)])
    d = run(pool(), a, b)
    assert d.labels_of(a)[ARCH] == d.labels_of(b)[ARCH] and not d.same_node(a, b)


def test_self_affinity_hostname():
    # It("should respect self pod affinity (hostname)")
    ps = pods(3, "s", labels=S2, affinity=[affinity_term(HOSTNAME, S2)])
    d = run(pool(), ps)
    assert d.node_count(ps) == 1


def test_self_affinity_first_empty_domain_only():
    # It("should respect self pod affinity for first empty topology domain only (hostname)")
    """Every pod must share one node; the largest type (96 vCPU) holds four 20-vCPU pods, the rest wait. With
    that node in flight and full, a second batch cannot go anywhere either."""
    ps = pods(10, "s", labels=S2, cpu="20", affinity=[affinity_term(HOSTNAME, S2)])
    d = run(pool(), ps)
    placed = [p for p in ps if d.scheduled(p)]
    assert 0 < len(placed) < 10 and d.node_count(placed) == 1
    again = pods(10, "t", labels=S2, cpu="20", affinity=[affinity_term(HOSTNAME, S2)])
    d2 = run(pool(), d.as_cluster("r1"), again)
    assert not any(d2.scheduled(p) for p in again)


def test_self_affinity_first_empty_domain_constrained_zones():
    # It("should respect self pod affinity for first empty topology domain only (hostname/constrained zones)")
    first = pod("first", labels=S2, node_selector={ZONE: Z1}, affinity=[affinity_term(HOSTNAME, S2)])
    d1 = run(pool(), first)
    assert d1.labels_of(first)[ZONE] == Z1
    more = pods(10, "m", labels=S2, required=[expr(ZONE, "In", Z2, Z3)], affinity=[affinity_term(HOSTNAME, S2)])
    d2 = run(pool(), d1.as_cluster("r1"), more)
    assert not any(d2.scheduled(p) for p in more)


def test_self_affinity_zone():
    # It("should respect self pod affinity (zone)")
    """Karpenter asserts one node; the constraint is one zone, which is what is checked (the pods are tiny, so
    they also share a node)."""
    ps = pods(3, "s", labels=S2, affinity=[affinity_term(ZONE, S2)])
    d = run(pool(), ps)
    assert len(set(d.domains_of(ZONE, ps))) == 1 and d.node_count(ps) == 1


def test_self_affinity_zone_with_constraint():
    # It("should respect self pod affinity (zone w/ constraint)")
    ps = pods(3, "s", labels=S2, affinity=[affinity_term(ZONE, S2)], required=[expr(ZONE, "In", Z3)])
    d = run(pool(), ps)
    assert set(d.domains_of(ZONE, ps)) == {Z3} and d.node_count(ps) == 1


def test_matching_affinities_incompatible_selectors():
    # It("should allow two nodes to be created when two pods with matching affinities have incompatible selectors")
    s1 = {"security": "s1"}
    a = pod("a", labels=s1, affinity=[affinity_term(ZONE, s1)], required=[expr(ZONE, "In", Z2)])
    b = pod("b", labels=s1, affinity=[affinity_term(ZONE, s1)], required=[expr(ZONE, "In", Z3)])
    d = run(pool(), a, b)
    assert (d.labels_of(a)[ZONE], d.labels_of(b)[ZONE]) == (Z2, Z3) and not d.same_node(a, b)


def test_preferred_pod_affinity_violated():
    # It("should allow violation of preferred pod affinity")
    p = pod("p", preferred_affinity=[(50, affinity_term(HOSTNAME, S2))])
    d = run(pool(), _host_spread(), p)
    assert d.scheduled(p)


def test_preferred_pod_anti_affinity_violated():
    # It("should allow violation of preferred pod anti-affinity")
    aff = pods(10, "aff", preferred_anti_affinity=[(50, affinity_term(ZONE, APP))])
    d = run(pool(), spread_pods(3, "s"), aff)
    assert all(d.scheduled(p) for p in aff)


@pytest.mark.parametrize("order", ["avoider-first", "target-first"])
def test_anti_affinity_hostname(order):
    # It("should separate nodes using simple pod anti-affinity on hostname")
    target = pod("target", labels=S2)
    avoider = pod("avoider", anti_affinity=[affinity_term(HOSTNAME, S2)])
    docs = [avoider, target] if order == "avoider-first" else [target, avoider]
    d = run(pool(), docs)
    assert not d.same_node(target, avoider)


def _zone_pods(**kw):
    return [pod(f"z{i}", cpu="2", node_selector={ZONE: z}, **kw) for i, z in enumerate(ZONES, 1)]


def test_anti_affinity_zone():
    # It("should not violate pod anti-affinity on zone")
    zoned = _zone_pods(labels=S2)
    aff = pod("aff", anti_affinity=[affinity_term(ZONE, S2)])
    d = run(pool(), zoned, aff)
    assert all(d.scheduled(p) for p in zoned) and "default/aff" in d.unschedulable


def test_anti_affinity_zone_other_first():
    # It("should not violate pod anti-affinity on zone (other schedules first)")
    """Karpenter leaves the target's zone open until launch, so the anti-affine pod waits for the next batch.
    nodewright pins the target's NodeClaim to one zone in its requirements, so placing the second pod in another
    zone in the same batch is safe: the check is that they never share a zone."""
    target = pod("target", labels=S2, cpu="2")
    aff = pod("aff", anti_affinity=[affinity_term(ZONE, S2)])
    d = run(pool(), target, aff)
    assert d.scheduled(target)
    if d.scheduled(aff):
        assert d.claim_of(aff)["zone"] != d.claim_of(target)["zone"]


def test_anti_affinity_arch():
    # It("should not violate pod anti-affinity (arch)")
    tsc = [spread(HOSTNAME, labels=S2)]
    a = pod("a", labels=S2, spreads=tsc, cpu="2", node_selector={ARCH: "arm64"})
    b = pod("b", labels=S2, spreads=tsc, cpu="1", anti_affinity=[affinity_term(ARCH, S2)])
    d = run(pool(), a, b)
    assert d.labels_of(a)[ARCH] != d.labels_of(b)[ARCH]


def test_preferred_anti_affinity_inverse():
    # It("should violate preferred pod anti-affinity on zone (inverse)")
    zoned = _zone_pods(preferred_anti_affinity=[(10, affinity_term(ZONE, S2))])
    target = pod("target", labels=S2)
    d = run(pool(), zoned, target)
    assert all(d.scheduled(p) for p in [*zoned, target])


def test_anti_affinity_inverse():
    # It("should not violate pod anti-affinity on zone (inverse)")
    zoned = _zone_pods(anti_affinity=[affinity_term(ZONE, S2)])
    target = pod("target", labels=S2)
    d = run(pool(), zoned, target)
    assert all(d.scheduled(p) for p in zoned) and "default/target" in d.unschedulable


def test_anti_affinity_schrodinger():
    # It("should not violate pod anti-affinity on zone (Schrödinger)")
    """Karpenter needs a second batch once the first pod's zone is known; nodewright pins that zone on the
    NodeClaim and may place both at once. Either way the target must end in another zone."""
    anywhere = pod("anywhere", cpu="2", anti_affinity=[affinity_term(ZONE, S2)])
    target = pod("target", labels=S2)
    d1 = run(pool(), anywhere, target)
    assert d1.scheduled(anywhere)
    d = d1 if d1.scheduled(target) else run(pool(), d1.as_cluster("r1"), target)
    assert d.labels_of(target)[ZONE] != d1.labels_of(anywhere)[ZONE]


def _zone_nodes_with(**kw):
    out = []
    for i, z in enumerate(ZONES, 1):
        out += [node(f"n{i}", zone=z), pod(f"z{i}", cpu="2", node_name=f"n{i}", node_selector={ZONE: z}, **kw)]
    return out


def test_anti_affinity_inverse_existing_nodes():
    # It("should not violate pod anti-affinity on zone (inverse w/existing nodes)")
    d = run(pool(), _zone_nodes_with(anti_affinity=[affinity_term(ZONE, S2)]), pod("target", labels=S2))
    assert "default/target" in d.unschedulable


def test_preferred_anti_affinity_inverse_existing_nodes():
    # It("should violate preferred pod anti-affinity on zone (inverse w/existing nodes)")
    d = run(pool(), _zone_nodes_with(preferred_anti_affinity=[(10, affinity_term(ZONE, S2))]), pod("target", labels=S2))
    assert d.scheduled("target")


def test_affinity_preference_conflicting_with_required():
    # It("should allow violation of a pod affinity preference with a conflicting required constraint")
    target = pod("target", labels=S2)
    ps = spread_pods(3, "s", spread(HOSTNAME), preferred_affinity=[(50, affinity_term(HOSTNAME, S2))])
    d = run(pool(), ps, target)
    assert all(d.scheduled(p) for p in [*ps, target])
    assert d.skew(HOSTNAME) == [1, 1, 1]


def test_anti_affinity_zone_topology_rounds():
    # It("should support pod anti-affinity with a zone topology")
    """Karpenter commits one zone per batch (three batches); nodewright pins zones on the NodeClaims and may
    commit several at once. In every round no zone holds two of these pods, and after three rounds all three
    zones are taken and a fourth round adds nothing."""
    cluster: list = []
    for r in range(4):
        d = run(pool(), cluster, pods(3, f"r{r}", labels=S2, anti_affinity=[affinity_term(ZONE, S2)]))
        assert set(d.skew(ZONE, labels=S2)) == {1} and len(d.skew(ZONE, labels=S2)) >= min(r + 1, 3)
        cluster = d.as_cluster(f"r{r}")
    assert d.skew(ZONE, labels=S2) == [1, 1, 1]


def test_affinity_to_missing_pod():
    # It("should not schedule pods with affinity to a non-existent pod")
    ps = pods(10, "s", affinity=[affinity_term(ZONE, S2)])
    d = run(pool(), ps)
    assert not any(d.scheduled(p) for p in ps)


def test_affinity_zone_unconstrained_target():
    # It("should support pod affinity with zone topology (unconstrained target)")
    """Karpenter schedules the followers only in the next batch, once the target's zone is known; nodewright
    pins the target's NodeClaim zone and may place them at once. Either way all eleven share one zone."""
    target = pod("target", labels=S2)
    followers = pods(10, "f", affinity=[affinity_term(ZONE, S2)])
    d = run(pool(), followers, target)
    assert d.scheduled(target)
    if not all(d.scheduled(p) for p in followers):
        assert not any(d.scheduled(p) for p in followers)
        d = run(pool(), d.as_cluster("r1"), followers)
    assert all(d.scheduled(p) for p in followers)
    assert d.skew(ZONE, labels=None) == [11]


def test_affinity_zone_constrained_target():
    # It("should support pod affinity with zone topology (constrained target)")
    target = pod("target", labels=S2, required=[expr(ZONE, "In", Z1)])
    followers = pods(10, "f", affinity=[affinity_term(ZONE, S2)])
    d = run(pool(), followers, target)
    assert d.skew(ZONE, labels=None) == [11]


def test_multiple_dependent_affinities():
    # It("should handle multiple dependent affinities")
    db, web, cache, ui = ({"type": t, "spread": "spread"} for t in ("db", "web", "cache", "ui"))
    ps = [pod("db", labels=db),
          pod("web", labels=web, affinity=[affinity_term(HOSTNAME, db)]),
          pod("cache", labels=cache, affinity=[affinity_term(HOSTNAME, web)]),
          pod("ui", labels=ui, affinity=[affinity_term(HOSTNAME, cache)])]
    d = run(pool(), ps)
    assert all(d.scheduled(p) for p in ps) and d.node_count(ps) == 1


def test_unsatisfiable_dependencies():
    # It("should fail to schedule pods with unsatisfiable dependencies")
    d = run(pool(), pod("db", labels={"type": "db"}, affinity=[affinity_term(HOSTNAME, {"type": "web"})]))
    assert "default/db" in d.unschedulable


def test_affinity_namespace_no_match():
    # It("should filter pod affinity topologies by namespace, no matching pods")
    target = pod("target", labels=S2, namespace="other-ns-no-match")
    follower = pod("follower", affinity=[affinity_term(HOSTNAME, S2)])
    d = run(pool(), namespace("other-ns-no-match"), _host_spread(), target, follower)
    assert d.scheduled(target) and "default/follower" in d.unschedulable


def test_affinity_namespace_list():
    # It("should filter pod affinity topologies by namespace, matching pods namespace list")
    target = pod("target", labels=S2, namespace="other-ns-list")
    follower = pod("follower", affinity=[affinity_term(HOSTNAME, S2, namespaces=["other-ns-list"])])
    d = run(pool(), namespace("other-ns-list"), _host_spread(), target, follower)
    assert d.same_node(target, follower)


def test_affinity_empty_namespace_selector():
    # It("should filter pod affinity topologies by namespace, empty namespace selector")
    target = pod("target", labels=S2, namespace="empty-ns-selector")
    follower = pod("follower", affinity=[affinity_term(HOSTNAME, S2, namespace_selector={})])
    d = run(pool(), namespace("empty-ns-selector", {"foo": "bar"}), _host_spread(), target, follower)
    assert d.same_node(target, follower)


# Taints (end of Describe("Topology"))


def test_nodepool_taints_on_nodes():
    # It("should taint nodes with NodePool taints")
    t = taint("test", "bar")
    d = run(pool(taints=[t]), pod("p", tolerations=[toleration(effect="NoSchedule", operator="Exists")]))
    assert t in d.claim_of("p")["taints"]


def test_pods_tolerating_nodepool_taints():
    # It("should schedule pods that tolerate NodePool constraints")
    t = taint("test-key", "test-value")
    ok = [pod("exists", tolerations=[toleration("test-key", effect="NoSchedule", operator="Exists")]),
          pod("equal", tolerations=[toleration("test-key", "test-value", "NoSchedule")])]
    bad = [pod("none"),
           pod("wrong-key", tolerations=[toleration("invalid", operator="Exists")]),
           pod("wrong-value", tolerations=[toleration("test-key", effect="NoSchedule", operator="Equal")])]
    d = run(pool(taints=[t]), ok, bad)
    assert all(d.scheduled(p) for p in ok)
    assert not any(d.scheduled(p) for p in bad)


def test_startup_taint_only():
    # It("should provision nodes with taints and schedule pods if the taint is only a startup taint")
    d = run(pool(startup_taints=[taint("ignore-me", "nothing-to-see-here")]), pod("p"))
    assert d.scheduled("p")


def test_no_taints_generated_for_exists_toleration():
    # It("should not generate taints for OpExists")
    d = run(pool(), pod("p", tolerations=[toleration("test-key", effect="NoExecute", operator="Exists")]))
    assert d.claim_of("p")["taints"] == []


# Describe("Topology with Volume Requirements")


def test_volume_zone_with_min_domains():
    # It("should schedule pod with PVC and TSC minDomains=3 when pods are spread across 3 zones")
    labels = {"app": "test"}
    c = spread(ZONE, labels=labels, min_domains=3)
    od = nodepool(requirements=[req(CAPACITY_TYPE, "In", "on-demand")])
    d1 = run(od, pods(3, "init", labels=labels, spreads=[c]))
    assert d1.skew(ZONE, labels=labels) == [1, 1, 1]
    with_pvc = pod("with-pvc", labels=labels, spreads=[c], volumes=[claim_volume("test-pvc")])
    d2 = run(od, d1.as_cluster("r1"), persistent_volume("test-pv", zones=[Z1]), pvc("test-pvc", volume_name="test-pv"),
             with_pvc)
    assert d2.labels_of(with_pvc)[ZONE] == Z1
    assert d2.skew(ZONE, labels=labels) == [2, 1, 1]
