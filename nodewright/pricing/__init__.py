"""Effective EC2 prices under a ``PricingPolicy`` (discounts, Savings Plans, Reserved Instances).

:mod:`nodewright.pricing.policy` reads and validates the document; :mod:`nodewright.pricing.engine` computes the
bill of a fleet and the marginal price of one more instance. See ``docs/pricing.md``.
"""

from nodewright.pricing.engine import (
    Bill,
    FleetPrices,
    Line,
    MarginalPricing,
    MinimumSaving,
    MoveSaving,
    PeriodCost,
    PricingEngine,
    Run,
    Usage,
    cost_over_time,
    marginal_pricing,
    normalization_factor,
    offering_price_table,
)
from nodewright.pricing.policy import PricingPolicy, load_pricing_policy, parse_pricing_policy

__all__ = [
    "Bill",
    "FleetPrices",
    "Line",
    "MarginalPricing",
    "MinimumSaving",
    "MoveSaving",
    "PeriodCost",
    "PricingEngine",
    "PricingPolicy",
    "Run",
    "Usage",
    "cost_over_time",
    "load_pricing_policy",
    "marginal_pricing",
    "normalization_factor",
    "offering_price_table",
    "parse_pricing_policy",
]
