"""SchedulingCache (issue 19): each NodePool's compiled instance types are kept between batches and rebuilt
exactly when an input changes. Every test runs two batches through one cache, as the provisioner does, and
compares the second decision with the one an empty cache gives for the same inputs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.cloud.unavailable import OfferingKey, UnavailableOfferings
from nodewright.scheduling import NodePoolSpec, Pod, SchedulingResult, schedule
from nodewright.scheduling import scheduler as scheduler_module
from nodewright.scheduling.cache import SchedulingCache
from nodewright.scheduling.scheduler import Scheduler
from nodewright.scheduling.topology import TopologySpreadConstraint
from nodewright.selectors import LabelSelector

from .helpers import GIB, make_type, pod, pool

# Cheapest first by $/vCPU: c.large fits 1.5 vCPU / 3 GiB; m.large fits more memory; r.large the most.
TYPES = [
    make_type("c.large", 2, 4, 0.085, spot=0.03),
    make_type("m.large", 2, 8, 0.096, spot=0.035),
    make_type("r.large", 2, 16, 0.126, spot=0.05),
    make_type("c.xlarge", 4, 8, 0.17, spot=0.06),
]


def decision(result: SchedulingResult) -> list[tuple[str, str, str, float, list[str]]]:
    """What a batch decided: per NodeClaim its type, zone, capacity type, USD/hour and pods."""
    return [(p.instance_type.name, p.zone, p.offering.capacity_type, p.price, sorted(x.name for x in p.pods))
            for p in sorted(result.new_nodeclaims, key=lambda p: sorted(x.name for x in p.pods))]


def run(pods: Sequence[Pod], spec: NodePoolSpec, types: list[InstanceType], cache: SchedulingCache | None,
        **kw: object) -> list[tuple[str, str, str, float, list[str]]]:
    return decision(schedule(pods, [], [spec], {spec.name: types}, cache=cache, **kw))  # type: ignore[arg-type]


PODS = [pod("a", 1000, 1024), pod("b", 500, 512)]


def test_unchanged_inputs_hit_the_cache_and_decide_the_same() -> None:
    cache = SchedulingCache()
    first = run(PODS, pool(), TYPES, cache)
    built = cache.stats.types_built
    hits = cache.stats.hits
    assert first == [("c.large", "test-1a", "spot", 0.03, ["a", "b"])]
    # A new NodePoolSpec object with the same fields (the controller rebuilds it every batch).
    assert run(PODS, pool(), TYPES, cache) == first == run(PODS, pool(), TYPES, None)
    assert cache.stats.types_built == built == len(TYPES)
    assert cache.stats.hits > hits


def test_a_changed_nodepool_rebuilds_and_decides_anew() -> None:
    cache = SchedulingCache()
    run(PODS, pool(), TYPES, cache)
    on_demand = pool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    assert run(PODS, on_demand, TYPES, cache) == [("c.large", "test-1a", "on-demand", 0.085, ["a", "b"])]
    assert cache.stats.types_built == 2 * len(TYPES)
    # Target utilization changes every budget: 1.5 vCPU no longer fit c.large at 50%.
    half = pool(target_utilization=0.5)
    assert run(PODS, half, TYPES, cache) == run(PODS, half, TYPES, None) == [
        ("c.xlarge", "test-1a", "spot", 0.06, ["a", "b"])]


def test_an_unavailable_offering_rebuilds_only_that_type() -> None:
    """An ICE on c.large spot in test-1a (the provider flags a copy of c.large): the next batch launches in
    test-1b; the three other types are reused."""
    cache = SchedulingCache()
    run(PODS, pool(), TYPES, cache)
    unavailable = UnavailableOfferings(clock=lambda: 0.0)
    unavailable.mark(OfferingKey("c.large", "test-1a", "spot"), "InsufficientInstanceCapacity")
    flagged = unavailable.flag(TYPES)
    assert [a is b for a, b in zip(flagged, TYPES, strict=True)] == [False, True, True, True]
    assert run(PODS, pool(), flagged, cache) == run(PODS, pool(), flagged, None) == [
        ("c.large", "test-1b", "spot", 0.03, ["a", "b"])]
    assert cache.stats.types_built == len(TYPES) + 1


def test_a_capacity_reservation_with_room_and_then_without() -> None:
    """An m.large reservation in test-1b (the provider adds a reserved offering to a copy of m.large): reserved
    capacity is launched first (Karpenter); once the reservation is used up the type is the catalog's again."""
    from nodewright.cloud.reservations import CapacityReservation, with_reservations

    cache = SchedulingCache()
    run(PODS, pool(), TYPES, cache)
    reservation = CapacityReservation("cr-0123", "m.large", "test-1b", available=1)
    reserved = with_reservations(TYPES, [reservation])
    assert [a is b for a, b in zip(reserved, TYPES, strict=True)] == [True, False, True, True]
    first = run(PODS, pool(), reserved, cache)
    assert first == run(PODS, pool(), reserved, None)
    assert [(t, z, ct) for t, z, ct, _, _ in first] == [("m.large", "test-1b", "reserved")]
    assert cache.stats.types_built == len(TYPES) + 1
    used_up = with_reservations(TYPES, [reservation], {"cr-0123": 1})
    assert run(PODS, pool(), used_up, cache) == [("c.large", "test-1a", "spot", 0.03, ["a", "b"])]


def test_a_new_daemonset_changes_the_overhead_and_the_decision() -> None:
    cache = SchedulingCache()
    team = pool(labels={"team": "a"})
    agent = Pod(namespace="kube-system", name="agent", requests={"cpu": 600, "memory": GIB, "pods": 1})
    assert run(PODS, team, TYPES, cache, daemonsets=[]) == [("c.large", "test-1a", "spot", 0.03, ["a", "b"])]
    # 1.5 vCPU of pods + 0.6 of daemonset no longer fit a 2-vCPU type.
    assert run(PODS, team, TYPES, cache, daemonsets=[agent]) == run(PODS, team, TYPES, None, daemonsets=[agent]) == [
        ("c.xlarge", "test-1a", "spot", 0.06, ["a", "b"])]
    # A DaemonSet for another team's nodes adds no overhead here: same inputs, the cache hits.
    hits = cache.stats.hits
    other = Pod(namespace="kube-system", name="b-agent", requests={"cpu": 600, "pods": 1}, node_selector={"team": "b"})
    assert run(PODS, team, TYPES, cache, daemonsets=[agent, other]) == [
        ("c.xlarge", "test-1a", "spot", 0.06, ["a", "b"])]
    assert cache.stats.hits > hits


def test_new_kubelet_settings_are_a_new_catalog_view() -> None:
    """maxPods 110 -> 1 (the EC2NodeClass's kubelet): the provider returns new types; one pod per node."""
    cache = SchedulingCache()
    run(PODS, pool(), TYPES, cache)
    one_pod = [make_type(t.name, int(t.capacity["cpu"]) // 1000, t.capacity["memory"] / GIB,
                         next(o.price for o in t.offerings if o.capacity_type == "on-demand"),
                         spot=next(o.price for o in t.offerings if o.capacity_type == "spot"), pods=1) for t in TYPES]
    assert run(PODS, pool(), one_pod, cache) == [("c.large", "test-1a", "spot", 0.03, ["a"]),
                                                 ("c.large", "test-1a", "spot", 0.03, ["b"])]


class _Discount:
    """A Pricing (the scheduler's protocol) taking ``off`` (fraction) off one family's offerings."""

    def __init__(self, family: str, off: float) -> None:
        self.family, self.off, self.version = family, off, 0

    def price(self, instance_type: str, offering: Offering) -> float:
        return round(offering.price * (1 - self.off), 6) if instance_type.startswith(self.family + ".") else offering.price

    def launched(self, instance_type: str, offering: Offering) -> float:
        return self.price(instance_type, offering)


def test_a_new_pricing_policy_decides_on_its_prices() -> None:
    cache = SchedulingCache()
    assert run(PODS, pool(), TYPES, cache) == [("c.large", "test-1a", "spot", 0.03, ["a", "b"])]
    r_cheap = run(PODS, pool(), TYPES, cache, pricing=lambda: _Discount("r", 0.5))
    assert r_cheap == run(PODS, pool(), TYPES, None, pricing=lambda: _Discount("r", 0.5)) == [
        ("r.large", "test-1a", "spot", 0.05, ["a", "b"])]
    m_cheap = run(PODS, pool(), TYPES, cache, pricing=lambda: _Discount("m", 0.5))
    assert m_cheap == [("m.large", "test-1a", "spot", 0.035, ["a", "b"])]
    # Back to list prices: the cached rankings were never touched by the policies.
    assert run(PODS, pool(), TYPES, cache) == [("c.large", "test-1a", "spot", 0.03, ["a", "b"])]


def test_limits_reserved_in_one_batch_do_not_leak_into_the_next() -> None:
    """4 vCPU of limits: each batch places two of the three pods on 4 vCPU, every time (a leaked reservation would
    leave the second batch nothing). Since issue 26 the packer's two c.large (each narrowed to 2-vCPU candidates so
    both fit the limit) are kept; they cost what one c.xlarge does ($0.17/h), and equal plans keep the packer's."""
    cache = SchedulingCache()
    pods = [pod(f"p{i}", 1500, 1024) for i in range(3)]
    limited = pool(limits={"cpu": 4000})
    first = schedule(pods, [], [limited], {"default": TYPES}, cache=cache)
    second = schedule(pods, [], [limited], {"default": TYPES}, cache=cache)
    for result in (first, second):
        assert [p.instance_type.name for p in result.new_nodeclaims] == ["c.large", "c.large"]
        assert sum(max(it.capacity["cpu"] for it in p.instance_types) for p in result.new_nodeclaims) <= 4000
        assert len(result.unschedulable) == 1
    assert decision(first) == decision(second)


def test_an_entry_that_saw_too_many_requirement_sets_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodewright.scheduling import cache as cache_module

    monkeypatch.setattr(cache_module, "MAX_REQUIREMENT_SETS", 1)
    cache = SchedulingCache()
    zones = [pod(f"z{i}", 500, 512, node_selector={"topology.kubernetes.io/zone": z})
             for i, z in enumerate(["test-1a", "test-1b"])]
    first = run(zones, pool(), TYPES, cache)
    assert len(cache.entries["default"].shared.compat) == 2  # one per zone: over the bound of 1
    # Each pass (optimized, then the greedy guard) finds the entry over the bound and rebuilds it.
    assert run(zones, pool(), TYPES, cache) == first == run(zones, pool(), TYPES, None)
    assert cache.stats.hits == 0 and cache.stats.types_built == 4 * len(TYPES)


def test_deleted_nodepools_are_forgotten() -> None:
    cache = SchedulingCache()
    run(PODS, pool("a"), TYPES, cache)
    run(PODS, pool("b"), TYPES, cache)
    cache.retain(["b"])
    assert sorted(cache.entries) == ["b"]


# --- the greedy guard ----------------------------------------------------------------------------------------

def _spread(name: str) -> Pod:
    spread = TopologySpreadConstraint(1, "topology.kubernetes.io/zone", label_selector=LabelSelector((("app", "s"),)))
    return pod(name, 1500, 512, labels={"app": "s"}, topology_spread=(spread,))


def test_no_greedy_pass_when_every_pod_went_through_the_loop(greedy_runs: list[int]) -> None:
    """Only topology-spread pods, nothing to re-pack (one pod per zone): the optimized pass ran the greedy
    stages on the same queue, so its plan is the greedy plan."""
    pods = [_spread("s1"), _spread("s2")]
    optimized = schedule(pods, [], [pool()], {"default": TYPES})
    assert greedy_runs == []
    assert decision(optimized) == decision(schedule(pods, [], [pool()], {"default": TYPES}, optimize=False)) == [
        ("c.large", "test-1a", "spot", 0.03, ["s1"]), ("c.large", "test-1b", "spot", 0.03, ["s2"])]


def test_no_greedy_pass_when_existing_capacity_took_everything(greedy_runs: list[int]) -> None:
    from nodewright.scheduling import ExistingNode

    node = ExistingNode(name="n1", labels={"topology.kubernetes.io/zone": "test-1a"},
                        allocatable={"cpu": 4000, "memory": 8 * GIB, "pods": 110})
    result = schedule(PODS, [node], [pool()], {"default": TYPES})
    assert greedy_runs == [] and result.new_nodeclaims == [] and sorted(p.name for p in result.existing["n1"]) == [
        "a", "b"]


def test_the_greedy_pass_runs_when_the_packer_decided(greedy_runs: list[int]) -> None:
    """Topology-free pods needing a new node went to the packer: greedy could be cheaper, so it is checked."""
    schedule(PODS, [], [pool()], {"default": TYPES})
    assert greedy_runs == [1]


def test_the_greedy_pass_runs_when_the_repack_replaced_a_nodeclaim(greedy_runs: list[int]) -> None:
    """Four zone-spread 1.5-vCPU pods, a 2-vCPU type at $0.02 and a 4-vCPU one at $0.10: the loop stacks two
    pods per zone on the large type, the re-pack splits them onto four small ones; greedy is checked then."""
    types = [make_type("s.small", 2, 4, 0.02), make_type("s.large", 4, 8, 0.10)]
    pods = [_spread(f"s{i}") for i in range(4)]
    scheduler = Scheduler(pods, [], [pool()], {"default": types}, None, None, None, True)
    for stage in scheduler_module.OPTIMIZED:
        stage(scheduler)
    assert scheduler.free == [] and scheduler.repacked
    result = schedule(pods, [], [pool()], {"default": types})
    assert greedy_runs == [1]
    assert sorted((p.zone, p.instance_type.name) for p in result.new_nodeclaims) == [
        ("test-1a", "s.small"), ("test-1a", "s.small"), ("test-1b", "s.small"), ("test-1b", "s.small")]


# --- the cached Pareto front ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes", [[(1000, 1024, 1)], [(1500, 3072, 1)], [(3000, 1024, 2), (500, 6144, 3)],
                                    [(250, 256, 7), (1000, 2048, 2), (2000, 512, 1)]])
def test_packing_from_the_cached_front_gives_the_same_bins(shapes: list[tuple[int, int, int]]) -> None:
    """The front of the pool's whole priced list, filtered to the types that fit some pod, is the front the
    packer would compute itself (one pod: the cheapest fitting type)."""
    from nodewright.scheduling.fronts import pack_inputs
    from nodewright.scheduling.nodeclaimtemplate import NodeClaimTemplate
    from nodewright.scheduling.packing import Item, pack

    template = NodeClaimTemplate(pool(), 0, TYPES, ["cpu", "memory", "pods"], {})
    types, prices, front = pack_inputs(template, template.reqs)
    assert front is not None and [t.name for t in types] == [t.name for t, _ in template.priced(template.reqs)]
    items = [Item((cpu, mem * 2**20, 1), count) for cpu, mem, count in shapes]
    with_front = pack(items, types, prices, front=front)
    without = pack(items, types, prices)
    assert [(b.info.name, b.fill) for b in with_front[0]] == [(b.info.name, b.fill) for b in without[0]]
    assert with_front[1] == without[1] == [0] * len(items)


def test_a_front_extended_piecewise_is_the_front_of_each_price_prefix() -> None:
    from nodewright.scheduling.fronts import Front
    from nodewright.scheduling.nodeclaimtemplate import NodeClaimTemplate
    from nodewright.scheduling.packing import pareto

    template = NodeClaimTemplate(pool(), 0, [*TYPES, make_type("m.xlarge", 4, 16, 0.192, spot=0.07),
                                             make_type("c.small", 1, 2, 0.04, spot=0.04)], ["cpu", "memory", "pods"], {})
    ranked = template.priced(template.reqs)
    front = Front(ranked)
    for limit in (0.03, 0.05, 0.0501, 0.065, None):
        prefix = [t for t, price in ranked if limit is None or price < limit]
        assert [t.name for t in front.below(limit)] == [t.name for t in pareto(prefix, front.prices)]
    assert [t.name for t in front.below(None)] == ["c.large", "m.large", "r.large", "c.xlarge", "m.xlarge"]
