"""Topology spread node inclusion policies (nodeAffinityPolicy / nodeTaintsPolicy) on existing nodes and on the
NodeClaims of the run, as the kube-scheduler and Karpenter's TopologyNodeFilter count them."""

from nodewright.scheduling import ExistingNode, LabelSelector, TopologySpreadConstraint, schedule
from nodewright.scheduling.taints import Taint

from .helpers import GIB, pod, pool, standard_types

ZONE = "topology.kubernetes.io/zone"
NODEPOOL = "karpenter.sh/nodepool"
WEB = LabelSelector((("app", "web"),))


def zones_of(result, prefix: str) -> list[str]:
    return sorted(nc.zone for nc in result.new_nodeclaims for p in nc.pods if p.name.startswith(prefix))


def spread(**policies: str) -> tuple[TopologySpreadConstraint, ...]:
    return (TopologySpreadConstraint(1, ZONE, label_selector=WEB, **policies),)


def two_pools():
    pools = [pool("a"), pool("b")]
    return pools, {p.name: standard_types() for p in pools}


def web_pods(policies: dict[str, str]) -> list:
    # "x" spreads over zones on pool a; "y" carries the same label but is pinned to pool b, zone test-1a, and is
    # queued first (more cpu), so the spread sees it before placing any "x".
    ys = [pod(f"y{i}", 1500, 256, labels={"app": "web"}, node_selector={NODEPOOL: "b", ZONE: "test-1a"}) for i in range(3)]
    xs = [
        pod(f"x{i}", 1000, 256, labels={"app": "web"}, node_selector={NODEPOOL: "a"}, topology_spread=spread(**policies))
        for i in range(2)
    ]
    return ys + xs


def test_node_affinity_policy_honor_skips_other_pools_nodeclaims() -> None:
    pools, types = two_pools()
    r = schedule(web_pods({}), [], pools, types)
    assert r.unschedulable == {}
    # The y pods sit on pool b NodeClaims, which the x pods' nodeSelector excludes: they are not counted.
    assert zones_of(r, "y") == ["test-1a"] * 3
    assert zones_of(r, "x") == ["test-1a", "test-1b"]


def test_node_affinity_policy_ignore_counts_other_pools_nodeclaims() -> None:
    pools, types = two_pools()
    r = schedule(web_pods({"node_affinity_policy": "Ignore"}), [], pools, types)
    # test-1a already holds three selected pods: both x pods go to test-1b (skew 3 - 2 = 1).
    assert zones_of(r, "x") == ["test-1b", "test-1b"]


def existing_web_node(taints: tuple[Taint, ...] = ()) -> ExistingNode:
    bound = [pod(f"old{i}", 100, 100, labels={"app": "web"}, node_name="n1") for i in range(3)]
    return ExistingNode(
        "n1", {ZONE: "test-1a", NODEPOOL: "b"}, {"cpu": 400, "memory": GIB, "pods": 10}, pods=bound, taints=taints
    )


def x_pods(policies: dict[str, str], selector: dict[str, str] | None = None) -> list:
    return [
        pod(f"x{i}", 1000, 256, labels={"app": "web"}, node_selector=selector or {}, topology_spread=spread(**policies))
        for i in range(2)
    ]


def test_node_affinity_policy_honor_on_existing_nodes() -> None:
    pools, types = two_pools()
    r = schedule(x_pods({}, {NODEPOOL: "a"}), [existing_web_node()], pools, types)
    assert zones_of(r, "x") == ["test-1a", "test-1b"]
    r = schedule(x_pods({"node_affinity_policy": "Ignore"}, {NODEPOOL: "a"}), [existing_web_node()], pools, types)
    assert zones_of(r, "x") == ["test-1b", "test-1b"]


def test_node_taints_policy_honor_on_existing_nodes() -> None:
    pools, types = two_pools()
    tainted = existing_web_node((Taint("dedicated", "NoSchedule", "db"),))
    # Ignore (default): the tainted node's three pods count, so both x pods go to test-1b.
    r = schedule(x_pods({}), [tainted], pools, types)
    assert zones_of(r, "x") == ["test-1b", "test-1b"]
    r = schedule(x_pods({"node_taints_policy": "Honor"}), [tainted], pools, types)
    assert zones_of(r, "x") == ["test-1a", "test-1b"]
    # PreferNoSchedule taints do not exclude a node.
    soft = existing_web_node((Taint("dedicated", "PreferNoSchedule", "db"),))
    r = schedule(x_pods({"node_taints_policy": "Honor"}), [soft], pools, types)
    assert zones_of(r, "x") == ["test-1b", "test-1b"]


def test_node_taints_policy_honor_leaves_untolerated_pool_domains_out() -> None:
    zone_a = [{"key": ZONE, "operator": "In", "values": ["test-1a"]}]
    zone_b = [{"key": ZONE, "operator": "In", "values": ["test-1b"]}]
    pools = [pool("open", requirements=zone_a), pool("tainted", requirements=zone_b, taints=(Taint("team", "NoSchedule"),))]
    types = {p.name: standard_types() for p in pools}
    honor = [pod(f"w{i}", 1000, 256, labels={"app": "web"}, topology_spread=spread(node_taints_policy="Honor")) for i in range(3)]
    r = schedule(honor, [], pools, types)
    # test-1b comes only from a pool whose taint the pods do not tolerate: not a domain, all three fit test-1a.
    assert r.unschedulable == {} and zones_of(r, "w") == ["test-1a"] * 3
    ignore = [pod(f"w{i}", 1000, 256, labels={"app": "web"}, topology_spread=spread()) for i in range(3)]
    r = schedule(ignore, [], pools, types)
    # test-1b counts as an empty domain: after one pod in test-1a the others would break maxSkew.
    assert zones_of(r, "w") == ["test-1a"] and len(r.unschedulable) == 2


# --- which domains the spread minimum runs over (issue 14) -----------------------------------------------------

ZONE_A = [{"key": ZONE, "operator": "In", "values": ["test-1a"]}]
ZONE_B = [{"key": ZONE, "operator": "In", "values": ["test-1b"]}]


def pinned_pools():
    pools = [pool("a", requirements=ZONE_A), pool("b", requirements=ZONE_B)]
    return pools, {p.name: standard_types() for p in pools}


def test_node_affinity_policy_ignore_counts_a_pool_the_pod_cannot_use() -> None:
    """Pool b (test-1b) is out of the pods' reach (nodeSelector pool a). Honor leaves its zone out of the
    minimum, so all three pods share test-1a; Ignore counts it as an empty domain: one pod, then maxSkew."""
    pools, types = pinned_pools()
    honor = [pod(f"w{i}", 1000, 256, labels={"app": "web"}, node_selector={NODEPOOL: "a"}, topology_spread=spread())
             for i in range(3)]
    r = schedule(honor, [], pools, types)
    assert r.unschedulable == {} and zones_of(r, "w") == ["test-1a"] * 3
    ignore = [pod(f"w{i}", 1000, 256, labels={"app": "web"}, node_selector={NODEPOOL: "a"},
                  topology_spread=spread(node_affinity_policy="Ignore")) for i in range(3)]
    r = schedule(ignore, [], pools, types)
    assert zones_of(r, "w") == ["test-1a"] and sorted(r.unschedulable) == ["default/w1", "default/w2"]


def test_node_affinity_policy_ignore_keeps_the_pods_own_zone_requirement() -> None:
    """Under Ignore the minimum still runs over the domains the pod's own requirement on the spread key allows
    (Karpenter's domainMinCount over podDomains): pods pinned to test-1a spread over test-1a alone."""
    pools, types = pinned_pools()
    pinned = [pod(f"w{i}", 1000, 256, labels={"app": "web"}, node_selector={ZONE: "test-1a"},
                  topology_spread=spread(node_affinity_policy="Ignore")) for i in range(3)]
    r = schedule(pinned, [], pools, types)
    assert r.unschedulable == {} and zones_of(r, "w") == ["test-1a"] * 3


def test_preferred_zone_never_narrows_the_spread_domains() -> None:
    """A preference for test-1a is tried first, but test-1b still counts for the minimum: the second pod cannot
    join test-1a (skew 2 - 0 > 1), relaxes the preference and goes to test-1b (aws/karpenter-provider-aws#4406)."""
    from nodewright.scheduling.pods import Affinity, NodeSelectorTerm, PreferredSchedulingTerm

    prefer_a = Affinity(node_preferred=(PreferredSchedulingTerm(50, NodeSelectorTerm(((ZONE, "In", ("test-1a",)),))),))
    pods = [pod(f"w{i}", 1000, 256, labels={"app": "web"}, affinity=prefer_a, topology_spread=spread())
            for i in range(4)]
    r = schedule(pods, [], [pool("any")], {"any": standard_types()})
    assert r.unschedulable == {} and zones_of(r, "w") == ["test-1a", "test-1a", "test-1b", "test-1b"]


def test_volume_zone_restricts_the_node_not_the_spread_domains() -> None:
    """A volume alternative (zone test-1b) decides where the pod lands, while both zones stay in the spread
    minimum and a NodeClaim in test-1b still counts the pod under nodeAffinityPolicy Honor (the pod's own
    node affinity has no zone)."""
    from nodewright.scheduling.pods import Affinity, NodeSelectorTerm

    in_b = Affinity(volume_required=(NodeSelectorTerm(((ZONE, "In", ("test-1b",)),)),))
    first = [pod(f"a{i}", 1000, 256, labels={"app": "web"}, node_selector={ZONE: "test-1a"}) for i in range(2)]
    with_volume = pod("v0", 500, 256, labels={"app": "web"}, affinity=in_b, topology_spread=spread())
    r = schedule([*first, with_volume], [], [pool("any")], {"any": standard_types()})
    # test-1a holds two selected pods, test-1b none: the minimum is 0 over both zones, so test-1b is admissible.
    assert r.unschedulable == {} and zones_of(r, "v") == ["test-1b"]
    assert in_b.placement_terms() == in_b.volume_required


def test_relaxing_through_volume_alternatives_keeps_the_pods_own_term() -> None:
    """Two own required terms x two volume zones make four placement terms, tried in turn; the class's own
    (strict) requirements follow the own term only, so the spread domains never take a volume's zone."""
    from nodewright.scheduling.pods import Affinity, NodeSelectorTerm
    from nodewright.scheduling.preferences import pod_classes
    from nodewright.scheduling.topology import Topology

    arch = [NodeSelectorTerm((("kubernetes.io/arch", "In", (a,)),)) for a in ("amd64", "arm64")]
    zones = [NodeSelectorTerm(((ZONE, "In", (z,)),)) for z in ("test-1a", "test-1b")]
    (cls,) = pod_classes([pod("v", 500, 256, affinity=Affinity(node_required=tuple(arch), volume_required=tuple(zones)))],
                         ["cpu"])
    topology = Topology()
    cls.refresh(topology)
    seen = []
    while True:
        seen.append((cls.strict.get("kubernetes.io/arch").values, cls.reqs.get(ZONE).values))
        if cls.relax(topology, False) is None:
            break
    assert seen == [({"amd64"}, {"test-1a"}), ({"amd64"}, {"test-1b"}), ({"arm64"}, {"test-1a"}), ({"arm64"}, {"test-1b"})]
    assert ZONE not in cls.strict
