"""Consolidation's saving at effective marginal prices under a PricingPolicy, and the per-NodePool minimum saving
(docs/pricing.md). Real us-east-1 list prices: c5.large $0.085/h, c5.xlarge $0.17/h, m6i.large $0.096/h (spot
$0.030912/h in us-east-1a)."""

from __future__ import annotations

from nodewright.disruption import (
    METHODS,
    SINGLE_NODE,
    ConsolidationOptions,
    DecisionOptions,
    decide_pass,
    validate,
)
from nodewright.disruption.pricing import move_threshold
from nodewright.pricing import MinimumSaving, PricingPolicy

from .helpers import NOW
from .real import policy, real_node, real_pool, view_of

TYPES = ("c5.large", "c5.xlarge", "m6i.large")
#: An EC2 Instance Savings Plan on m6i with commitment to spare: one m6i.large uses $0.0576 of its $0.10/h.
M6I_PLAN = policy({"savingsPlans": [{"type": "EC2Instance", "family": "m6i", "region": "us-east-1",
                                     "commitmentUsdPerHour": 0.1, "discountPercent": 40}]})
#: A zonal Reserved Instance for one c5.xlarge in us-east-1a.
C5_RI = policy({"reservedInstances": [{"instanceType": "c5.xlarge", "zone": "us-east-1a", "count": 1}]})


def _options(pricing: PricingPolicy | None, *methods: str) -> DecisionOptions:
    return DecisionOptions(consolidation=ConsolidationOptions(pricing=pricing), methods=methods or METHODS)


def _half_idle_c5_xlarge(**pool_kw: object):
    """One c5.xlarge running one 1500m/3Gi pod: any 2-vCPU type holds it."""
    return view_of([real_node("a", "c5.xlarge", [(1500, 3072)])], real_pool(types=TYPES, **pool_kw))  # type: ignore[arg-type]


def test_without_a_policy_the_cheapest_listed_type_replaces() -> None:
    d = decide_pass(_half_idle_c5_xlarge(), NOW, _options(None)).decision
    assert d is not None and d.message() == "Consolidating 1 node into 1 c5.large, saving $0.09/h"
    assert [(p.instance_type.name, p.price, p.effective_price) for p in d.replacements] == [("c5.large", 0.085, None)]
    assert round(d.savings, 6) == 0.085 and not d.effective


def test_a_savings_plan_with_commitment_to_spare_makes_its_family_the_replacement() -> None:
    view = _half_idle_c5_xlarge()
    d = decide_pass(view, NOW, _options(M6I_PLAN)).decision
    assert d is not None and d.message() == "Consolidating 1 node into 1 m6i.large, saving $0.17/h at effective prices"
    [plan] = d.replacements
    assert (plan.instance_type.name, plan.offering.capacity_type, plan.price, plan.effective_price) == (
        "m6i.large", "on-demand", 0.096, 0.0)
    assert d.saving is not None and (d.saving.usd_per_hour, d.saving.removed_usd_per_hour) == (0.17, 0.17)
    fresh = validate(d, view, NOW, _options(M6I_PLAN))
    assert fresh is not None and fresh.replacements[0].instance_type.name == "m6i.large"


def test_spot_or_on_demand_is_chosen_at_marginal_prices() -> None:
    view = _half_idle_c5_xlarge(capacity_types=("spot", "on-demand"))
    listed = decide_pass(view, NOW, _options(None)).decision
    assert listed is not None
    assert [(p.instance_type.name, p.offering.capacity_type, p.price) for p in listed.replacements] == [
        ("m6i.large", "spot", 0.030912)]
    assert round(listed.savings, 6) == 0.139088
    # Under the plan an on-demand m6i.large costs nothing more: cheaper than spot.
    view = _half_idle_c5_xlarge(capacity_types=("spot", "on-demand"))
    d = decide_pass(view, NOW, _options(M6I_PLAN)).decision
    assert d is not None
    assert [(p.instance_type.name, p.offering.capacity_type, p.effective_price) for p in d.replacements] == [
        ("m6i.large", "on-demand", 0.0)]
    assert d.saving is not None and d.saving.usd_per_hour == 0.17


def test_a_node_free_under_a_reserved_instance_is_not_consolidated() -> None:
    assert decide_pass(_half_idle_c5_xlarge(), NOW, _options(None)).decision is not None
    outcome = decide_pass(_half_idle_c5_xlarge(), NOW, _options(C5_RI))
    assert outcome.decision is None and outcome.skipped == ()  # removing it saves nothing: not even simulated


def test_the_reserved_instance_moves_to_the_other_node() -> None:
    """Two c5.xlarge, one RI: removing either leaves the RI covering the other, so each costs $0.17/h effective
    and one replaced by a c5.large still saves $0.085/h."""
    view = view_of([real_node("a", "c5.xlarge", [(1500, 3072)]), real_node("b", "c5.xlarge", [(3000, 2048)])],
                   real_pool(types=TYPES))
    d = decide_pass(view, NOW, _options(C5_RI)).decision
    assert d is not None and [c.name for c in d.candidates] == ["a"]
    assert d.message() == "Consolidating 1 node into 1 c5.large, saving $0.09/h at effective prices"
    assert d.saving is not None and (d.saving.usd_per_hour, d.saving.removed_usd_per_hour) == (0.085, 0.17)


def test_minimum_saving_in_dollars_skips_the_move_and_says_why() -> None:
    outcome = decide_pass(_half_idle_c5_xlarge(minimum=MinimumSaving(0.1, None)), NOW, _options(None))
    assert outcome.decision is None
    assert [s.message() for s in outcome.skipped] == [
        "Not consolidating 1 node (a) into 1 c5.large: it would save $0.0850/h, below the minimum $0.1000/h"]
    assert outcome.skipped[0].pools == ("default",) and outcome.skipped[0].method == "single-node-consolidation"


def test_minimum_saving_in_percent() -> None:
    outcome = decide_pass(_half_idle_c5_xlarge(minimum=MinimumSaving(None, 60)), NOW, _options(None))
    assert outcome.decision is None
    assert [s.message() for s in outcome.skipped] == [
        "Not consolidating 1 node (a) into 1 c5.large: it would save 50% of the $0.1700/h the nodes it removes "
        "cost, below the minimum 60%"]
    taken = decide_pass(_half_idle_c5_xlarge(minimum=MinimumSaving(0.08, 50)), NOW, _options(None))
    assert taken.decision is not None and taken.skipped == ()


def test_minimum_saving_applies_at_effective_prices() -> None:
    """Under the plan the move saves $0.17/h (100%): it clears $0.10/h, which the list-price move would not."""
    d = decide_pass(_half_idle_c5_xlarge(minimum=MinimumSaving(0.1, None)), NOW, _options(M6I_PLAN)).decision
    assert d is not None and d.replacements[0].instance_type.name == "m6i.large"


def test_minimum_saving_gates_deletes() -> None:
    """A c5.large whose pod fits on the other node: deleting it saves its $0.085/h (single-node only: merging
    both into one c5.xlarge saves as much)."""
    nodes = [real_node("a", "c5.large", [(500, 512)]), real_node("b", "c5.xlarge", [(3000, 4096)])]
    taken = decide_pass(view_of(nodes, real_pool(types=TYPES)), NOW, _options(None, SINGLE_NODE)).decision
    assert taken is not None and taken.message() == "Consolidating 1 node by deleting it, saving $0.09/h"
    nodes = [real_node("a", "c5.large", [(500, 512)]), real_node("b", "c5.xlarge", [(3000, 4096)])]
    outcome = decide_pass(view_of(nodes, real_pool(types=TYPES, minimum=MinimumSaving(0.1, None))), NOW,
                          _options(None, SINGLE_NODE))
    assert outcome.decision is None
    assert [s.message() for s in outcome.skipped] == [
        "Not consolidating 1 node (a) by deleting it: it would save $0.0850/h, below the minimum $0.1000/h"]


def test_a_move_spanning_pools_must_clear_the_strictest_minimum() -> None:
    lenient = real_pool("lenient", TYPES, minimum=MinimumSaving(0.05, 10))
    strict = real_pool("strict", TYPES, minimum=MinimumSaving(0.3, None))
    assert move_threshold([lenient, strict]) == MinimumSaving(0.3, 10)
    assert move_threshold([real_pool()]) == MinimumSaving(None, None)
    nodes = [real_node("a", "c5.xlarge", [(1000, 1024)], pool="lenient"),
             real_node("b", "c5.xlarge", [(1000, 1024)], pool="strict")]
    outcome = decide_pass(view_of(nodes, lenient, strict), NOW, _options(None))
    # Both into one c5.xlarge saves $0.17/h: below the strict pool's $0.30/h. Alone, the lenient pool's node is
    # deleted (its pod fits on the other): $0.17/h, above its own minimum.
    assert [s.message() for s in outcome.skipped][:1] == [
        "Not consolidating 2 nodes (a, b) into 1 c5.xlarge: it would save $0.1700/h, below the minimum $0.3000/h"]
    d = outcome.decision
    assert d is not None and [c.name for c in d.candidates] == ["a"]
    assert d.message() == "Consolidating 1 node by deleting it, saving $0.17/h"
