"""The effective-price engine against hand-computed dollars (USD/hour).

List prices are the bundled us-east-1 on-demand prices (AWS Price List API): m6i.large $0.096, m6i.xlarge $0.192,
m6i.2xlarge $0.384, c6i.large $0.085, m5.large $0.096, c5a.xlarge $0.154, m6a.xlarge $0.1728.
"""

from typing import Any

import pytest

from nodewright.cloud.prices import PriceTable, on_demand_prices, spot_discount
from nodewright.pricing import PricingEngine, Usage, normalization_factor, parse_pricing_policy

OD = "on-demand"
SPOT = "spot"


def policy(**spec: Any) -> Any:
    return parse_pricing_policy({"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy", "spec": spec})


def engine(spot: dict[str, dict[str, float]] | None = None, **spec: Any) -> PricingEngine:
    table = on_demand_prices("us-east-1")
    if spot:
        table = PriceTable(table.region, table.on_demand, table.source, table.fallback, spot=spot)
    return PricingEngine(policy(**spec), table)


def m6i(size: str = "large", zone: str = "us-east-1a", capacity: str = OD) -> Usage:
    return Usage(f"m6i.{size}", zone, capacity)


def test_list_prices_are_the_bundled_ones() -> None:
    e = engine()
    assert [e.list_price(Usage(t, "us-east-1a", OD)) for t in
            ("m6i.large", "m6i.xlarge", "m6i.2xlarge", "c6i.large", "m5.large", "c5a.xlarge", "m6a.xlarge")] == [
        0.096, 0.192, 0.384, 0.085, 0.096, 0.154, 0.1728]


def test_without_a_policy_the_marginal_price_is_the_list_price() -> None:
    e = engine()
    assert e.marginal_price([m6i(), m6i()], m6i()) == 0.096
    bill = e.bill([m6i(), m6i("xlarge")])
    assert (bill.list_usd_per_hour, bill.total_usd_per_hour) == (0.288, 0.288)


def test_zonal_reserved_instances_are_free_up_to_their_count_in_their_zone() -> None:
    e = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 2}])
    assert e.marginal_price([], m6i()) == 0.0
    assert e.marginal_price([m6i()], m6i()) == 0.0
    assert e.marginal_price([m6i(), m6i()], m6i()) == 0.096  # the third pays on-demand
    assert e.marginal_price([], m6i(zone="us-east-1b")) == 0.096  # zonal: other zones pay
    assert e.marginal_price([], m6i("xlarge")) == 0.192  # zonal: no size flexibility


def test_regional_reserved_instance_is_size_flexible_smallest_sizes_first() -> None:
    # One m6i.xlarge regional RI = 8 units: two m6i.large (4 units each), or half an m6i.2xlarge (16 units).
    e = engine(reservedInstances=[{"instanceType": "m6i.xlarge", "region": "us-east-1", "count": 1}])
    assert e.marginal_price([m6i(zone="us-east-1c")], m6i(zone="us-east-1b")) == 0.0
    assert e.marginal_price([m6i(), m6i()], m6i()) == 0.096
    bill = e.bill([m6i("2xlarge"), m6i("large")])
    # the large takes 4 units first; the 2xlarge gets the other 4/16: pays 0.75 x 0.384 = 0.288
    assert [(line.reserved_fraction, line.effective_usd_per_hour) for line in bill.lines] == [(0.25, 0.288),
                                                                                              (1.0, 0.0)]
    assert bill.usage_usd_per_hour == 0.288


def test_reserved_instances_never_cover_spot_or_other_regions() -> None:
    e = engine(spot={"m6i.large": {"": 0.03}},
               reservedInstances=[{"instanceType": "m6i.large", "region": "us-east-1", "count": 1},
                                  {"instanceType": "c6i.large", "region": "us-west-2", "count": 5}])
    assert e.marginal_price([], m6i(capacity=SPOT)) == 0.03
    assert e.marginal_price([], Usage("c6i.large", "us-east-1a", OD)) == 0.085


def test_reserved_instance_amortised_cost_is_in_the_bill_not_in_the_marginal_price() -> None:
    e = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 2,
                                   "usdPerHour": 0.06}])
    bill = e.bill([m6i()])
    assert (bill.reserved_usd_per_hour, bill.usage_usd_per_hour, bill.total_usd_per_hour) == (0.12, 0.0, 0.12)
    assert bill.lines[0].effective_usd_per_hour == 0.06
    assert e.marginal_price([m6i()], m6i()) == 0.0


EC2_SP_M6I = {"type": "EC2Instance", "family": "m6i", "region": "us-east-1", "discountPercent": 40}


def test_ec2_instance_savings_plan_usage_under_the_commitment_costs_nothing() -> None:
    # 40% off m6i.large: SP rate 0.0576/h. A commitment of 0.0864 covers 1.5 instance-hours.
    e = engine(savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 0.0864}])
    assert e.marginal_price([], m6i()) == 0.0
    assert e.marginal_price([m6i()], m6i()) == 0.048  # half covered, half at on-demand 0.096
    assert e.marginal_price([m6i(), m6i()], m6i()) == 0.096  # past the commitment: on-demand, not the SP rate
    assert e.marginal_price([], Usage("c6i.large", "us-east-1a", OD)) == 0.085  # other family
    (line,) = e.bill([m6i(), m6i()]).lines  # identical instances share one line and its coverage equally
    assert (line.count, line.savings_plan_fraction) == (2, 0.75)
    assert line.effective_usd_per_hour == 0.0672  # (0.0864 commitment used + 0.048 on-demand) / 2
    bill = e.bill([m6i(), m6i()])
    assert (bill.usage_usd_per_hour, bill.total_usd_per_hour, bill.unused_commitment_usd_per_hour) == (
        0.048, 0.1344, 0.0)


def test_unused_commitment_is_billed_anyway() -> None:
    bill = engine(savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 1.0}]).bill([m6i()])
    assert (bill.unused_commitment_usd_per_hour, bill.total_usd_per_hour) == (0.9424, 1.0)


def test_savings_plans_do_not_cover_spot() -> None:
    e = engine(spot={"m6i.large": {"": 0.03}}, savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 1.0}])
    assert e.marginal_price([], m6i(capacity=SPOT)) == 0.03


def test_compute_savings_plan_takes_the_highest_discount_first_and_a_new_node_can_displace_it() -> None:
    # Compute SP: 20% off by default, 30% off c6i. Commitment 0.0595 = one c6i.large at its SP rate (0.085 x 0.7).
    e = engine(savingsPlans=[{"type": "Compute", "commitmentUsdPerHour": 0.0595, "discountPercent": 20,
                              "rates": [{"family": "c6i", "discountPercent": 30}]}])
    c6i = Usage("c6i.large", "us-east-1b", OD)
    # Alone, the m6i.large (SP rate 0.0768) gets 0.0595/0.0768 of its hour covered: pays 0.096 x (1 - 0.774740).
    assert e.bill([m6i()]).usage_usd_per_hour == 0.021625
    # With the c6i.large (30% > 20%), the plan moves to it and the m6i.large pays 0.096 in full.
    assert e.bill([m6i(), c6i]).usage_usd_per_hour == 0.096
    # So the c6i.large's marginal price is 0.096 - 0.021625, below its on-demand 0.085.
    assert e.marginal_price([m6i()], c6i) == 0.074375


def test_equal_savings_percentage_covers_the_lowest_rate_first() -> None:
    # 20% off everything; the commitment (0.0768) is one m6i.large's SP rate: the large, not the xlarge, gets it.
    e = engine(savingsPlans=[{"type": "Compute", "commitmentUsdPerHour": 0.0768, "discountPercent": 20}])
    bill = e.bill([m6i("xlarge"), m6i("large")])
    assert [line.savings_plan_fraction for line in bill.lines] == [0.0, 1.0]
    assert bill.usage_usd_per_hour == 0.192


def test_ec2_instance_plans_apply_before_compute_plans() -> None:
    # The Compute plan's 50% would be the highest percentage, yet the EC2 Instance plan goes first.
    e = engine(savingsPlans=[
        {"type": "Compute", "commitmentUsdPerHour": 0.048, "discountPercent": 50},
        {**EC2_SP_M6I, "commitmentUsdPerHour": 0.0576},
    ])
    bill = e.bill([m6i(), m6i(zone="us-east-1b")])
    # first m6i.large: the EC2 Instance plan (0.0576 = its full rate); second: the Compute plan (0.048).
    assert [line.savings_plan_fraction for line in bill.lines] == [1.0, 1.0]
    assert [line.effective_usd_per_hour for line in bill.lines] == [0.0576, 0.048]
    assert e.marginal_price([m6i(), m6i()], m6i()) == 0.096


def test_reserved_instances_are_used_before_savings_plans() -> None:
    e = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 1}],
               savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 0.0576}])
    bill = e.bill([m6i(), m6i(zone="us-east-1b")])
    assert [(line.reserved_fraction, line.savings_plan_fraction) for line in bill.lines] == [(1.0, 0.0),
                                                                                             (0.0, 1.0)]
    assert e.marginal_price([m6i(), m6i()], m6i()) == 0.096


def test_discounts_most_specific_rule_wins_and_capacity_type_selects() -> None:
    e = engine(spot={"m6i.large": {"": 0.03}}, discounts=[
        {"match": {"family": "m6i"}, "percent": 10},
        {"match": {"instanceType": "m6i.large"}, "usdPerHour": 0.01},
        {"match": {"capacityType": "spot"}, "percent": 50},
    ])
    assert e.marginal_price([], m6i()) == 0.086  # type rule beats family rule: 0.096 - 0.01
    assert e.marginal_price([], m6i("xlarge")) == 0.1728  # family: 0.192 x 0.9
    assert e.marginal_price([], m6i(capacity=SPOT)) == 0.02  # instance-type rule is more specific than spot's
    assert e.marginal_price([], Usage("c6i.large", "us-east-1a", SPOT)) == pytest.approx(
        e.list_price(Usage("c6i.large", "us-east-1a", SPOT)) * 0.5, abs=1e-6)
    assert e.marginal_price([], Usage("c6i.large", "us-east-1a", OD)) == 0.085


def test_absolute_discount_never_goes_below_zero() -> None:
    e = engine(discounts=[{"match": {"instanceType": "m6i.large"}, "usdPerHour": 1.0}])
    assert e.marginal_price([], m6i()) == 0.0


def test_discounts_apply_only_to_usage_no_commitment_covers() -> None:
    e = engine(discounts=[{"match": {"family": "m6i"}, "percent": 10}],
               savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 0.0576}])
    bill = e.bill([m6i(), m6i(zone="us-east-1b")])
    assert [line.effective_usd_per_hour for line in bill.lines] == [0.0576, 0.0864]


def test_field_report_spot_70_percent_under_on_demand_savings_plan_narrows_it_to_40() -> None:
    # Second field report: spot ~70% under on-demand; with Savings Plans the gap is ~40%.
    e = engine(spot={"m5.large": {"": 0.0288}},  # 70% under the on-demand 0.096
               savingsPlans=[{"type": "EC2Instance", "family": "m5", "region": "us-east-1",
                              "discountPercent": 50, "commitmentUsdPerHour": 0.48}])
    fleet = [Usage("m5.large", "us-east-1a", OD)] * 10
    bill = e.bill(fleet)
    assert {line.effective_usd_per_hour for line in bill.lines} == {0.048}  # the SP rate, fully covered
    spot = e.marginal_price(fleet, Usage("m5.large", "us-east-1a", SPOT))
    assert spot == 0.0288
    assert round(1 - spot / 0.096, 6) == 0.7  # versus list on-demand
    assert round(1 - spot / bill.lines[0].effective_usd_per_hour, 6) == 0.4  # versus the Savings Plans rate
    # and the eleventh on-demand m5.large, past the commitment, pays on-demand again
    assert e.marginal_price(fleet, Usage("m5.large", "us-east-1a", OD)) == 0.096
    # the bundled spot model puts m5 in the reported 60-70% range too
    assert 0.6 <= spot_discount("m5") <= 0.7


def test_marginal_prices_in_sequence_sum_to_the_bill_difference() -> None:
    e = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 1}],
               savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 0.0864}])
    adds = [m6i(), m6i(), m6i(), m6i("xlarge")]
    prices = e.marginal_prices([], adds)
    # RI; full SP (0.0576 of 0.0864); half SP (0.0288 left covers half: pays 0.048); past everything: 0.192
    assert prices == [0.0, 0.0, 0.048, 0.192]
    assert round(sum(p or 0 for p in prices), 6) == round(
        e.bill(adds).total_usd_per_hour - e.bill([]).total_usd_per_hour, 6)


def test_consolidation_saving_counts_what_is_really_paid() -> None:
    ri = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 2}])
    fleet = [m6i(), m6i(), m6i()]
    assert ri.saving(fleet, [m6i()]) == 0.096  # removing any one frees an RI for the on-demand one
    assert ri.saving(fleet, [m6i(), m6i()]) == 0.096  # the last one is covered: only 0.096 was ever paid
    # kubernetes-sigs/karpenter#1962's shape: 4 c5a.xlarge -> 2 m6a.xlarge: list saving 0.616 - 0.3456 = 0.2704
    c5a = [Usage("c5a.xlarge", "us-east-1a", OD)] * 4
    m6a = [Usage("m6a.xlarge", "us-east-1a", OD)] * 2
    assert engine().saving(c5a, c5a, m6a) == 0.2704
    # ... but with 4 regional c5a.xlarge RIs the c5a fleet costs nothing: the move would cost 0.3456/h
    c5a_ri = engine(reservedInstances=[{"instanceType": "c5a.xlarge", "region": "us-east-1", "count": 4}])
    assert c5a_ri.saving(c5a, c5a, m6a) == -0.3456
    with pytest.raises(ValueError, match="not in the fleet"):
        c5a_ri.saving(c5a, m6a)


def test_fleet_prices_caches_the_baseline() -> None:
    e = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 1}])
    quote = e.for_fleet([m6i("xlarge")])
    assert quote.bill.total_usd_per_hour == 0.192
    assert [quote.marginal_price(m6i()), quote.marginal_price(m6i(zone="us-east-1b")),
            quote.marginal_price(m6i())] == [0.0, 0.096, 0.0]


def test_unknown_instance_types_are_unpriced() -> None:
    e = engine()
    unknown = Usage("zz9.large", "us-east-1a", OD)
    assert e.marginal_price([], unknown) is None
    bill = e.bill([unknown, m6i()])
    assert (bill.unpriced, bill.total_usd_per_hour) == ((unknown,), 0.096)


def test_usage_from_node_labels() -> None:
    labels = {"node.kubernetes.io/instance-type": "m6i.large", "topology.kubernetes.io/zone": "us-east-1c",
              "karpenter.sh/capacity-type": "spot"}
    assert Usage.from_labels(labels) == Usage("m6i.large", "us-east-1c", "spot")
    assert Usage.from_labels({"node.kubernetes.io/instance-type": "m6i.large"}) == Usage("m6i.large", "", OD)
    assert Usage.from_labels({}) is None


@pytest.mark.parametrize(("name", "factor"), [("t3.nano", 0.25), ("t3.micro", 0.5), ("t3.small", 1.0),
                                             ("t3.medium", 2.0), ("m6i.large", 4.0), ("m6i.xlarge", 8.0),
                                             ("m6i.4xlarge", 32.0), ("m6i.24xlarge", 192.0), ("m6i.metal", None)])
def test_normalization_factors(name: str, factor: float | None) -> None:
    assert normalization_factor(name) == factor


def test_marginal_price_shortcut_agrees_with_the_full_bill() -> None:
    # Usage no RI or plan can cover is priced without recomputing the bill; it must give the same dollars.
    e = engine(spot={"m6i.large": {"": 0.03}}, discounts=[{"match": {"capacityType": "on-demand"}, "percent": 5}],
               reservedInstances=[{"instanceType": "c6i.large", "region": "us-east-1", "count": 1}],
               savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 0.0576}])
    fleet = [m6i(), Usage("c6i.large", "us-east-1b", OD), Usage("r6i.large", "us-east-1a", OD)]
    for usage in [m6i(), m6i(capacity=SPOT), Usage("c6i.xlarge", "us-east-1a", OD),
                  Usage("r6i.large", "us-east-1c", OD), Usage("m5.large", "us-east-1a", OD)]:
        assert e.marginal_price(fleet, usage) == e.saving([*fleet, usage], [usage]), usage
    assert not e.committable(Usage("m5.large", "us-east-1a", OD))
    assert e.committable(Usage("c6i.xlarge", "us-east-1a", OD))  # the regional c6i RI is size-flexible
    assert e.marginal_price(fleet, Usage("m5.large", "us-east-1a", OD)) == 0.0912  # 0.096 x 0.95


def test_cost_over_time_integrates_the_bill_between_launches_and_terminations() -> None:
    from nodewright.pricing import Run, cost_over_time

    # Two hours. An EC2 Instance plan worth one m6i.large (0.0576/h) is paid all along.
    e = engine(savingsPlans=[{**EC2_SP_M6I, "commitmentUsdPerHour": 0.0576}])
    runs = [Run(m6i(), 0.0, None),            # all 2 h: under the plan
            Run(m6i(), 1800.0, 5400.0),       # 1 h at on-demand 0.096
            Run(m6i(capacity=SPOT), 3600.0)]  # 1 h of spot at the modelled spot price
    cost = cost_over_time(e, runs, 0.0, 7200.0)
    spot = e.list_price(m6i(capacity=SPOT)) or 0.0
    assert cost.hours == 2.0
    assert cost.list_usd == round(2 * 0.096 + 0.096 + spot, 4)
    assert cost.effective_usd == round(2 * 0.0576 + 0.096 + spot, 4)


def test_plans_and_reserved_instances_of_other_regions_are_not_in_this_bill() -> None:
    e = engine(savingsPlans=[{**EC2_SP_M6I, "region": "us-west-2", "commitmentUsdPerHour": 5.0},
                             {"type": "Compute", "commitmentUsdPerHour": 0.5, "discountPercent": 20}],
               reservedInstances=[{"instanceType": "m6i.large", "region": "eu-west-1", "count": 3, "usdPerHour": 1}])
    bill = e.bill([m6i()])
    # only the Compute plan: it covers the m6i.large at 0.0768 and leaves 0.4232 unused
    assert (bill.savings_plan_commitment_usd_per_hour, bill.unused_commitment_usd_per_hour,
            bill.reserved_usd_per_hour, bill.total_usd_per_hour) == (0.5, 0.4232, 0.0, 0.5)


def test_minimum_saving_threshold_in_dollars_and_percent() -> None:
    from nodewright.pricing import MinimumSaving

    # karpenter#1962's shape at list prices: 4 c5a.xlarge ($0.616/h) -> 2 m6a.xlarge ($0.3456/h)
    c5a = [Usage("c5a.xlarge", "us-east-1a", OD)] * 4
    m6a = [Usage("m6a.xlarge", "us-east-1a", OD)] * 2
    move = engine().move_saving(c5a, c5a, m6a)
    assert (move.usd_per_hour, move.removed_usd_per_hour, move.percent) == (0.2704, 0.616, 43.8961)
    assert MinimumSaving().shortfall(move) is None
    assert MinimumSaving(usd_per_hour=0.25, percent=40).shortfall(move) is None
    assert MinimumSaving(usd_per_hour=0.3).shortfall(move) == (
        "it would save $0.2704/h, below the minimum $0.3000/h")
    assert MinimumSaving(usd_per_hour=0.1, percent=50).shortfall(move) == (
        "it would save 43.8961% of the $0.6160/h the nodes it removes cost, below the minimum 50%")
    # replacing one m6i.large by a t3.large ($0.0832): a 13.3% saving of $0.0128/h
    small = engine().move_saving([m6i()], [m6i()], [Usage("t3.large", "us-east-1a", OD)])
    assert (small.usd_per_hour, small.percent) == (0.0128, 13.3333)
    assert MinimumSaving(usd_per_hour=0.02).shortfall(small) == "it would save $0.0128/h, below the minimum $0.0200/h"
    # under an RI the same move saves nothing at all
    ri = engine(reservedInstances=[{"instanceType": "m6i.large", "zone": "us-east-1a", "count": 1}])
    covered = ri.move_saving([m6i()], [m6i()], [Usage("t3.large", "us-east-1a", OD)])
    assert (covered.usd_per_hour, covered.removed_usd_per_hour, covered.percent) == (-0.0832, 0.0, 0.0)
    assert MinimumSaving().shortfall(covered) == (
        "it would save nothing: $-0.0832/h at effective prices (the nodes it removes cost $0.0000/h)")
