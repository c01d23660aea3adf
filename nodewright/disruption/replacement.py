"""Turn a scheduling simulation into a consolidation option, or reject it (Karpenter ``computeConsolidation``).

* Any pod left unschedulable: no option.
* No new NodeClaim: delete the candidates.
* More than one new NodeClaim: no option (consolidation never grows the node count).
* One new NodeClaim: its candidate instance types are filtered to those strictly cheaper than the candidates
  together (USD/hour); none left -> no option. A replacement allowed to be spot or on-demand is pinned to spot
  (the price filter assumed the spot price; if spot capacity is missing the launch fails and the candidates
  stay, rather than a dearer on-demand node replacing them).
* Spot to spot (every candidate spot, replacement spot): for a single candidate only when at least
  :data:`MIN_SPOT_TO_SPOT_TYPES` (15) cheaper types exist, launching the 15 cheapest (or as many of the cheapest
  as its ``minValues`` need, when more) -- so a node is not replaced by a marginally cheaper, likely interrupted
  type; multi-node spot consolidation is not bounded this way (several nodes collapse into one).
* The cheaper types must still meet the replacement's ``minValues`` (counted over its NodePool's requirements,
  :mod:`nodewright.scheduling.minvalues`), else no option: Karpenter's
  ``RemoveInstanceTypeOptionsByPriceAndMinValues``.

Prices are :class:`~nodewright.disruption.pricing.MovePricing`'s: list prices (above), or under a PricingPolicy
what the candidates cost at effective marginal prices and each offering's marginal price once they are gone; a
replacement allowed both capacity types is then pinned to whichever has the cheaper candidate (ties to spot), as
provisioning chooses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.disruption.model import Node
from nodewright.disruption.pricing import MovePricing
from nodewright.disruption.screen import offering_for
from nodewright.scheduling import NodeClaimPlan, Requirement, Requirements, SchedulingResult
from nodewright.scheduling.minvalues import Flexibility
from nodewright.scheduling.nodeclaimtemplate import TypeInfo

#: Karpenter's ``MinInstanceTypesForSpotToSpotConsolidation``.
MIN_SPOT_TO_SPOT_TYPES = 15
SPOT = L.CAPACITY_TYPE_SPOT
ON_DEMAND = L.CAPACITY_TYPE_ON_DEMAND


Priced = list[tuple[InstanceType, Offering, float]]


def _priced(plan: NodeClaimPlan, capacity_type: str | None,
            price: Callable[[InstanceType, Offering], float]) -> Priced:
    out = []
    for it in plan.instance_types:
        offering = offering_for(it, plan.requirements, capacity_type)
        if offering is not None:
            out.append((it, offering, price(it, offering)))
    out.sort(key=lambda t: (t[2], t[1].price, t[0].name))
    return out


def _with_types(plan: NodeClaimPlan, priced: Priced, capacity_type: str | None, effective: bool) -> NodeClaimPlan:
    reqs = plan.requirements.with_requirement(Requirement(L.INSTANCE_TYPE, False, tuple(t[0].name for t in priced)))
    labels = dict(plan.labels)
    if capacity_type is not None:
        reqs = reqs.with_requirement(Requirement(L.CAPACITY_TYPE, False, (capacity_type,)))
        labels[L.CAPACITY_TYPE] = capacity_type
    cheapest, offering, price = priced[0]
    return dataclasses.replace(
        plan,
        instance_types=[t[0] for t in priced],
        instance_type=cheapest,
        offering=offering,
        requirements=reqs,
        labels=labels,
        effective_price=price if effective else plan.effective_price,
    )


def cheaper_replacement(
    plan: NodeClaimPlan, candidates: Sequence[Node], spot_to_spot: bool = True,
    pool_requirements: Requirements | None = None, pricing: MovePricing | None = None,
) -> NodeClaimPlan | None:
    """``plan`` narrowed to types strictly cheaper than ``candidates`` (rules in the module docstring), or None.
    ``pool_requirements``: its NodePool's, to count ``minValues`` over (None: minValues not checked);
    ``pricing``: the pass's prices (None: list prices)."""
    effective = pricing is not None and pricing.effective
    total = pricing.removed_cost(candidates) if pricing is not None else sum(c.price for c in candidates)

    def price(it: InstanceType, offering: Offering) -> float:
        return pricing.replacement_price(candidates, it, offering) if pricing is not None else offering.price

    ct_req = plan.requirements.get(L.CAPACITY_TYPE)
    pin: str | None = None
    if ct_req is None or (ct_req.has(SPOT) and ct_req.has(ON_DEMAND)):
        pin = SPOT
        if effective:  # the capacity type whose cheapest candidate costs less at marginal prices (ties to spot)
            spot, on_demand = _priced(plan, SPOT, price), _priced(plan, ON_DEMAND, price)
            if on_demand and (not spot or on_demand[0][2] < spot[0][2]):
                pin = ON_DEMAND
    priced = [t for t in _priced(plan, pin, price) if t[2] < total]
    if not priced:
        return None
    min_values = plan.requirements.min_values() if pool_requirements is not None else {}
    needed: int | None = 0
    if min_values:
        assert pool_requirements is not None
        needed = Flexibility(pool_requirements).needed([TypeInfo(t[0], ()) for t in priced], min_values)
        if needed is None:
            return None
    all_spot = all(c.capacity_type == SPOT for c in candidates)
    if all_spot and priced[0][1].capacity_type == SPOT:
        if not spot_to_spot:
            return None
        if len(candidates) == 1:
            if len(priced) < MIN_SPOT_TO_SPOT_TYPES:
                return None
            priced = priced[:max(MIN_SPOT_TO_SPOT_TYPES, needed or 0)]
    return _with_types(plan, priced, pin, effective)


def consolidation_replacements(
    result: SchedulingResult, candidates: Sequence[Node], spot_to_spot: bool = True,
    pool_requirements: Mapping[str, Requirements] | None = None, pricing: MovePricing | None = None,
) -> list[NodeClaimPlan] | None:
    """The replacements a consolidation of ``candidates`` needs ([] = delete), or None when not worth it.
    ``pool_requirements``: NodePool name -> its requirements, for the replacement's ``minValues``;
    ``pricing``: the pass's prices (None for list prices)."""
    if result.unschedulable or len(result.new_nodeclaims) > 1:
        return None
    if not result.new_nodeclaims:
        return []
    first = result.new_nodeclaims[0]
    reqs = None if pool_requirements is None else pool_requirements.get(first.nodepool)
    plan = cheaper_replacement(first, candidates, spot_to_spot, pool_requirements=reqs, pricing=pricing)
    return None if plan is None else [plan]
