"""NodeClaimTemplate.priced: the one "cheapest first, with prices" list the packer and the re-pack start from."""

from __future__ import annotations

from nodewright.scheduling import Requirement
from nodewright.scheduling.nodeclaimtemplate import NodeClaimTemplate

from .helpers import make_type, pool

DIMS = ["cpu", "memory", "pods"]


def types() -> list:  # type: ignore[type-arg]
    return [
        make_type("r.large", 2, 16, 0.126, spot=0.05),
        make_type("m.large", 2, 8, 0.096),
        make_type("c.large", 2, 4, 0.085, spot=0.03),
        make_type("c.xlarge", 4, 8, 0.17, spot=0.06),
    ]


def listed(template: NodeClaimTemplate, reqs) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    return [(t.name, price) for t, price in template.priced(reqs)]


def test_spot_first_when_offered_and_only_types_offering_it() -> None:
    template = NodeClaimTemplate(pool(), 0, types(), DIMS, {})
    assert listed(template, template.reqs) == [("c.large", 0.03), ("r.large", 0.05), ("c.xlarge", 0.06)]


def test_on_demand_prices_under_an_on_demand_requirement() -> None:
    template = NodeClaimTemplate(pool(), 0, types(), DIMS, {})
    reqs = template.reqs.with_requirement(Requirement("karpenter.sh/capacity-type", False, ["on-demand"]))
    assert listed(template, reqs) == [("c.large", 0.085), ("m.large", 0.096), ("r.large", 0.126), ("c.xlarge", 0.17)]


def test_types_that_would_breach_the_remaining_limits_are_left_out() -> None:
    """3 vCPU left of the pool's limits: a 4-vCPU launch would breach them; reserving 2 vCPU leaves none."""
    template = NodeClaimTemplate(pool(limits={"cpu": 3000}), 0, types(), DIMS, {})
    assert listed(template, template.reqs) == [("c.large", 0.03), ("r.large", 0.05)]
    template.reserve(template.types_for(template.reqs)[:1])
    assert listed(template, template.reqs) == []


def test_list_price_offering_lookups_scan_to_what_the_ranking_lists_first() -> None:
    """Without a Pricing an offering lookup scans once per offering filter instead of ranking the offerings
    (issue 30); it must return the offering the ranking (price, zone, then catalog order) lists first."""
    import random

    from nodewright.cloud.instancetype import InstanceType, Offering
    from nodewright.scheduling import Requirements
    from nodewright.scheduling.typeinfo import TypeInfo, offering_filter

    rng = random.Random(3)
    zones = ("us-east-1a", "us-east-1b", "us-east-1c")
    filters = [Requirements()] + [
        Requirements.from_expressions([{"key": key, "operator": "In", "values": values}])
        for key, values in (("topology.kubernetes.io/zone", ["us-east-1b"]),
                            ("topology.kubernetes.io/zone", ["us-east-1a", "us-east-1c"]),
                            ("karpenter.sh/capacity-type", ["spot"]),
                            ("topology.k8s.aws/zone-id", ["use1-az1", "use1-az2"]))
    ]
    for case in range(200):
        base = make_type(f"t{case}.large", 2, 8, 0.1)
        offerings = tuple(
            Offering(rng.choice(zones), rng.choice(("spot", "on-demand")), rng.choice((0.03, 0.05, 0.05, 0.1)),
                     available=rng.random() > 0.2, zone_id=f"use1-az{i}")
            for i in range(rng.randint(0, 8))
        )
        it = InstanceType(base.name, base.labels, base.capacity, base.overhead, offerings)
        for reqs in filters:
            flt = offering_filter(reqs)
            for ct in (None, "spot", "on-demand", "reserved"):
                scanned = TypeInfo(it, (1, 1, 1)).offering(reqs, ct)
                assert scanned is TypeInfo(it, (1, 1, 1)).first_offering(flt, ct)


def test_a_cold_one_pod_batch_compiles_few_budgets_and_no_offering_ranking() -> None:
    from nodewright.cloud.catalog import load_instance_types
    from nodewright.scheduling import Pod, schedule
    from nodewright.scheduling.cache import SchedulingCache

    catalog = load_instance_types("us-east-1")
    cache = SchedulingCache()
    pod = Pod(namespace="default", name="p", requests={"cpu": 500, "memory": 512 * 2**20, "pods": 1})
    result = schedule([pod], [], [pool()], {"default": catalog}, cache=cache)
    assert len(result.new_nodeclaims) == 1
    compiled = cache.entries["default"].shared.types

    def has(t: object, name: str) -> bool:
        try:
            object.__getattribute__(t, name)
        except AttributeError:
            return False
        return True

    assert len(compiled) > 1000
    assert sum(has(t, "budget") for t in compiled) < 200  # the cheapest types, up to 60 that fit
    assert not any(has(t, "_by_price") for t in compiled)
    # Read on demand, every budget is the eager one.
    from nodewright.scheduling.typeinfo import pool_budget

    assert all(t.budget == pool_budget(pool(), t.it, ("cpu", "memory", "pods"), {}) for t in compiled[:50])
