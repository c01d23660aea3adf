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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.disruption.model import Node
from nodewright.disruption.screen import offering_for
from nodewright.scheduling import NodeClaimPlan, Requirement, Requirements, SchedulingResult
from nodewright.scheduling.minvalues import Flexibility
from nodewright.scheduling.nodeclaimtemplate import TypeInfo

#: Karpenter's ``MinInstanceTypesForSpotToSpotConsolidation``.
MIN_SPOT_TO_SPOT_TYPES = 15
SPOT = L.CAPACITY_TYPE_SPOT
ON_DEMAND = L.CAPACITY_TYPE_ON_DEMAND


def _priced(plan: NodeClaimPlan, capacity_type: str | None) -> list[tuple[InstanceType, Offering]]:
    out = []
    for it in plan.instance_types:
        offering = offering_for(it, plan.requirements, capacity_type)
        if offering is not None:
            out.append((it, offering))
    out.sort(key=lambda pair: (pair[1].price, pair[0].name))
    return out


def _with_types(plan: NodeClaimPlan, priced: list[tuple[InstanceType, Offering]], capacity_type: str | None) -> NodeClaimPlan:
    reqs = plan.requirements.with_requirement(Requirement(L.INSTANCE_TYPE, False, tuple(it.name for it, _ in priced)))
    labels = dict(plan.labels)
    if capacity_type is not None:
        reqs = reqs.with_requirement(Requirement(L.CAPACITY_TYPE, False, (capacity_type,)))
        labels[L.CAPACITY_TYPE] = capacity_type
    cheapest, offering = priced[0]
    return dataclasses.replace(
        plan,
        instance_types=[it for it, _ in priced],
        instance_type=cheapest,
        offering=offering,
        requirements=reqs,
        labels=labels,
    )


def cheaper_replacement(
    plan: NodeClaimPlan, candidates: Sequence[Node], spot_to_spot: bool = True,
    pool_requirements: Requirements | None = None,
) -> NodeClaimPlan | None:
    """``plan`` narrowed to types strictly cheaper than ``candidates`` (rules in the module docstring), or None.
    ``pool_requirements``: its NodePool's, to count ``minValues`` over (None: minValues not checked)."""
    total = sum(c.price for c in candidates)
    ct_req = plan.requirements.get(L.CAPACITY_TYPE)
    pin: str | None = None
    if ct_req is None or (ct_req.has(SPOT) and ct_req.has(ON_DEMAND)):
        pin = SPOT
    priced = [(it, o) for it, o in _priced(plan, pin) if o.price < total]
    if not priced:
        return None
    min_values = plan.requirements.min_values() if pool_requirements is not None else {}
    needed: int | None = 0
    if min_values:
        assert pool_requirements is not None
        needed = Flexibility(pool_requirements).needed([TypeInfo(it, ()) for it, _ in priced], min_values)
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
    return _with_types(plan, priced, pin)


def consolidation_replacements(
    result: SchedulingResult, candidates: Sequence[Node], spot_to_spot: bool = True,
    pool_requirements: Mapping[str, Requirements] | None = None,
) -> list[NodeClaimPlan] | None:
    """The replacements a consolidation of ``candidates`` needs ([] = delete), or None when not worth it.
    ``pool_requirements``: NodePool name -> its requirements, for the replacement's ``minValues``."""
    if result.unschedulable or len(result.new_nodeclaims) > 1:
        return None
    if not result.new_nodeclaims:
        return []
    first = result.new_nodeclaims[0]
    reqs = None if pool_requirements is None else pool_requirements.get(first.nodepool)
    plan = cheaper_replacement(first, candidates, spot_to_spot, reqs)
    return None if plan is None else [plan]
