"""Effective prices beside list prices in a ``nodewright simulate`` decision (the JSON of
:func:`nodewright.sim.decision.to_json`).

Each new NodeClaim gets ``effective_price_per_hour``: its marginal price (:mod:`nodewright.pricing.engine`) on top
of the existing nodes and the NodeClaims listed before it, so RIs and Savings Plans commitment go to the first
NodeClaims that can use them. ``total_effective_price_per_hour`` is their sum: what the decision adds to the
hourly bill. The scheduler made the choice on the same marginal prices (docs/pricing.md, "Integration").

Scenario replays (``simulate --scenario --pricing``) add ``effective_cost_usd`` to each run's summary
(:func:`effective_cost_usd`). The NodePool cost metric's ``price="effective"`` series is :func:`group_costs`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodewright.cloud.prices import PriceTable
from nodewright.pricing.engine import PricingEngine, Run, Usage, cost_over_time
from nodewright.pricing.policy import PricingPolicy


def policy_label(policy: PricingPolicy, path: str) -> str:
    """``"PricingPolicy <name> (<path>)"`` for reports; the path alone when the policy has no name."""
    name = policy.metadata.model_extra.get("name") if policy.metadata and policy.metadata.model_extra else None
    return f"PricingPolicy {name} ({path})" if name else f"PricingPolicy ({path})"


def add_effective_prices(decision: Mapping[str, Any], policy: PricingPolicy, prices: PriceTable,
                         existing: Iterable[Usage], source: str) -> dict[str, Any]:
    """A copy of ``decision`` with ``effective_price_per_hour`` on each NodeClaim, and
    ``total_effective_price_per_hour`` and ``pricing_policy`` (``source``) beside ``total_price_per_hour``.
    USD/hour, rounded to 1e-6."""
    engine = PricingEngine(policy, prices)
    claims = [dict(nc) for nc in decision["nodeclaims"]]
    new = [Usage(nc["instance_type"], nc["zone"], nc["capacity_type"]) for nc in claims]
    for nc, price in zip(claims, engine.marginal_prices(list(existing), new), strict=True):
        # None only for a type the price table lacks; the scheduler priced it, so keep its list price.
        nc["effective_price_per_hour"] = nc["price_per_hour"] if price is None else price
    out: dict[str, Any] = {}
    for key, value in decision.items():
        out[key] = claims if key == "nodeclaims" else value
        if key == "total_price_per_hour":
            out["total_effective_price_per_hour"] = round(sum(nc["effective_price_per_hour"] for nc in claims), 6)
            out["pricing_policy"] = source
    return out


def effective_cost_usd(policy: PricingPolicy, prices: PriceTable, runs: Iterable[Run], start: float,
                       end: float) -> float:
    """Dollars the instance ``runs`` cost between ``start`` and ``end`` under ``policy`` (commitments included):
    the ``effective_cost_usd`` of a scenario summary, beside its list-price ``cost_usd``."""
    return cost_over_time(PricingEngine(policy, prices), list(runs), start, end).effective_usd


def group_costs(engine: PricingEngine, fleet: Iterable[Usage],
                groups: Mapping[str, Sequence[tuple[Usage, float]]]) -> dict[str, float]:
    """Each group's share of the fleet's bill under ``engine``'s policy, USD/hour rounded to 1e-6: what
    ``nodewright_nodepool_cost_per_hour_usd{price="effective"}`` reports per NodePool.

    ``fleet`` is every running instance of the cluster (RIs and Savings Plans are shared by all of them, in the
    engine's order); ``groups`` maps a name to its instances, each with its list price (the offering's, as the
    ``price="list"`` series). An instance RIs or a Savings Plan could cover costs its bill line's
    :attr:`~nodewright.pricing.engine.Line.effective_usd_per_hour` (identical instances share their coverage
    equally); any other (spot, uncovered families) its list price after discounts. Not attributed to any group:
    commitment no instance uses and idle RIs' ``usdPerHour`` (so the groups sum to at most the bill's total).
    An instance missing from the fleet's bill (no list price in the engine's table) costs its list price.
    """
    lines = {line.usage: line.effective_usd_per_hour for line in engine.bill(fleet).lines}
    out: dict[str, float] = {}
    for name, members in groups.items():
        total = 0.0
        for usage, listed in members:
            share = lines.get(usage) if engine.committable(usage) else None
            if share is None:
                share = engine.discounted_price(usage, listed) or 0.0
            total += share
        out[name] = round(total, 6)
    return out
