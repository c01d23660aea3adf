"""The re-pack of topology NodeClaims (nodewright.scheduling.repack): each rule with an exact plan."""

from __future__ import annotations

from nodewright.scheduling import (
    Affinity,
    LabelSelector,
    PodAffinityTerm,
    SchedulingResult,
    TopologySpreadConstraint,
    schedule,
)

from .helpers import make_type, pod, pool

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
APP = LabelSelector((("app", "web"),))


def two_types() -> list:  # type: ignore[type-arg]
    """2 vCPU for $0.02/h or 4 vCPU for $0.10/h: two 1.5-vCPU pods need the large one, apart two small ones."""
    return [make_type("s.small", 2, 4, 0.02), make_type("s.large", 4, 8, 0.10)]


def web(n: int, **kw: object) -> list:  # type: ignore[type-arg]
    return [pod(f"web-{i}", 1500, 512, labels={"app": "web"}, **kw) for i in range(n)]


def plan(r: SchedulingResult) -> list[tuple[str, str, int]]:
    return sorted((nc.zone, nc.instance_type.name, len(nc.pods)) for nc in r.new_nodeclaims)


def test_zone_spread_claims_split_within_their_zone() -> None:
    """Splitting a NodeClaim's pods over nodes of the same zone keeps the zone counts (skew 0)."""
    pods = web(4, topology_spread=(TopologySpreadConstraint(1, ZONE, label_selector=APP),))
    greedy = schedule(pods, [], [pool()], {"default": two_types()}, optimize=False)
    assert plan(greedy) == [("test-1a", "s.large", 2), ("test-1b", "s.large", 2)]
    assert round(greedy.total_price, 4) == 0.20
    r = schedule(pods, [], [pool()], {"default": two_types()})
    assert plan(r) == [("test-1a", "s.small", 1)] * 2 + [("test-1b", "s.small", 1)] * 2
    assert round(r.total_price, 4) == 0.08
    assert [nc.hostname for nc in r.new_nodeclaims] == [f"hostname-placeholder-{i:04d}" for i in range(4)]


def test_hostname_spread_claims_split_since_fewer_pods_per_host_only_lower_the_skew() -> None:
    pods = web(4, topology_spread=(TopologySpreadConstraint(2, HOST, label_selector=APP),))
    greedy = schedule(pods, [], [pool()], {"default": two_types()}, optimize=False)
    assert [len(nc.pods) for nc in greedy.new_nodeclaims] == [2, 2]
    r = schedule(pods, [], [pool()], {"default": two_types()})
    assert [(nc.instance_type.name, len(nc.pods)) for nc in r.new_nodeclaims] == [("s.small", 1)] * 4


def test_split_forbidden_when_a_hostname_pod_affinity_keeps_pods_together() -> None:
    aff = Affinity(pod_affinity_required=(PodAffinityTerm(HOST, APP),))
    r = schedule(web(2, affinity=aff), [], [pool()], {"default": two_types()})
    assert [(nc.instance_type.name, len(nc.pods)) for nc in r.new_nodeclaims] == [("s.large", 2)]
    assert round(r.total_price, 4) == 0.10


def test_min_domains_zone_counts_unchanged_by_the_split() -> None:
    """maxSkew 2 with minDomains 2 over two zones: greedy stacks two pods per zone; the split keeps 2 + 2."""
    tsc = TopologySpreadConstraint(2, ZONE, label_selector=APP, min_domains=2)
    greedy = schedule(web(4, topology_spread=(tsc,)), [], [pool()], {"default": two_types()}, optimize=False)
    assert plan(greedy) == [("test-1a", "s.large", 2), ("test-1b", "s.large", 2)]
    r = schedule(web(4, topology_spread=(tsc,)), [], [pool()], {"default": two_types()})
    assert plan(r) == [("test-1a", "s.small", 1)] * 2 + [("test-1b", "s.small", 1)] * 2


def test_split_refused_when_candidate_lists_would_breach_limits() -> None:
    """Each NodeClaim reserves the largest of its candidates (4 vCPU when s.small's candidates include s.large).
    With 8 vCPU left, four such NodeClaims would not fit; since issue 26 the split narrows each one's candidates to
    what leaves room for the later ones (s.small only, 2 vCPU), so four s.small ($0.08/h) fit the limit and replace
    the greedy two s.large ($0.20/h); with 16 the split is kept as before."""
    tsc = TopologySpreadConstraint(1, ZONE, label_selector=APP)
    tight = schedule(web(4, topology_spread=(tsc,)), [], [pool(limits={"cpu": 8000})], {"default": two_types()})
    assert plan(tight) == [("test-1a", "s.small", 1)] * 2 + [("test-1b", "s.small", 1)] * 2
    roomy = schedule(web(4, topology_spread=(tsc,)), [], [pool(limits={"cpu": 16000})], {"default": two_types()})
    assert plan(roomy) == [("test-1a", "s.small", 1)] * 2 + [("test-1b", "s.small", 1)] * 2
    for r, limit in ((tight, 8000), (roomy, 16000)):
        assert sum(max(it.capacity["cpu"] for it in nc.instance_types) for nc in r.new_nodeclaims) <= limit


def test_split_capped_by_max_new_nodeclaims() -> None:
    tsc = TopologySpreadConstraint(1, ZONE, label_selector=APP)
    r = schedule(web(4, topology_spread=(tsc,)), [], [pool()], {"default": two_types()}, max_new_nodeclaims=3)
    # The first NodeClaim's split makes 3; splitting the second would make 4, so it stays.
    assert plan(r) == [("test-1a", "s.small", 1), ("test-1a", "s.small", 1), ("test-1b", "s.large", 2)]
    one = schedule(web(2), [], [pool()], {"default": two_types()}, max_new_nodeclaims=1)
    assert plan(one) == [("test-1a", "s.large", 2)]


def test_host_anti_affinity_pods_keep_one_per_node_and_mix_only_through_a_split() -> None:
    """A NodeClaim holding an anti-affine pod plus other pods is split, never merged with another."""
    anti = Affinity(pod_anti_affinity_required=(PodAffinityTerm(HOST, LabelSelector((("app", "db"),))),))
    dbs = [pod(f"db-{i}", 1500, 512, labels={"app": "db"}, affinity=anti) for i in range(2)]
    r = schedule(dbs, [], [pool()], {"default": two_types()})
    assert [(nc.instance_type.name, len(nc.pods)) for nc in r.new_nodeclaims] == [("s.small", 1)] * 2


def test_min_values_kept_by_split_nodes() -> None:
    """minValues 2 on the instance family: every split node still lists two families (a smaller node's fitting
    types are a superset of a larger one's, and the re-pack checks minValues on each new NodeClaim)."""
    reqs = [{"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 2}]
    types = [make_type("s.small", 2, 4, 0.02), make_type("s.large", 4, 8, 0.10), make_type("t.large", 4, 8, 0.11)]
    tsc = TopologySpreadConstraint(1, ZONE, label_selector=APP)
    r = schedule(web(4, topology_spread=(tsc,)), [], [pool(requirements=reqs)], {"default": types})
    assert plan(r) == [("test-1a", "s.small", 1)] * 2 + [("test-1b", "s.small", 1)] * 2
    assert all(
        [it.name for it in nc.instance_types] == ["s.small", "s.large", "t.large"] for nc in r.new_nodeclaims
    )
