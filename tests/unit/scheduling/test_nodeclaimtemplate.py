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
