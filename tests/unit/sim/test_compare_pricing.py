"""``simulate --scenario examples/scenarios/committed-spend.yaml --pricing examples/pricing/savings-plan.yaml
--compare-pricing``: nodewright deciding on list prices, then on effective prices, both billed under the policy
(the scenario ``make demo`` shows). Exact dollars of the deterministic simulation (seed 20)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.pricing import load_pricing_policy
from nodewright.sim.compare import compare_pricing, render_pricing_comparison
from nodewright.sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "examples" / "scenarios" / "committed-spend.yaml"
POLICY = ROOT / "examples" / "pricing" / "savings-plan.yaml"
#: What the policy costs every hour whatever runs: the m6i Savings Plan commitment ($0.2304/h) and the two zonal
#: m5.large RIs' amortised $0.06/h each (the regional c6i.xlarge RI gives no usdPerHour).
SUNK_PER_HOUR = 0.2304 + 2 * 0.06


@pytest.fixture(scope="module")
def doc() -> dict:
    return compare_pricing(load_scenario(str(SCENARIO)), load_pricing_policy(POLICY), "example")


def test_on_list_prices_everything_is_spot_and_the_commitments_go_unused(doc) -> None:
    listed = doc["runs"][0]
    assert listed["decided_on"] == "list"
    assert listed["launches"] == {"c6i.large spot": 10}
    # Spot is never covered (and the policy's 5% is for on-demand), so the bill is the spot usage plus what the
    # policy costs anyway: one hour of it.
    assert listed["summary"]["cost_usd"] == 0.25
    assert listed["summary"]["effective_cost_usd"] == pytest.approx(0.25 + SUNK_PER_HOUR, abs=1e-4) == 0.6004


def test_on_effective_prices_the_paid_for_capacity_is_used_first(doc) -> None:
    effective = doc["runs"][1]
    assert effective["decided_on"] == "effective"
    # Two c6i.large on the regional c6i.xlarge RI (8 units), two m5.large on the zonal RIs, four m6i.large on the
    # Savings Plan (4 x $0.0576 = the $0.2304 commitment), spot for the last two pods.
    assert effective["launches"] == {"c6i.large on-demand": 2, "c6i.large spot": 2, "m5.large on-demand": 2,
                                     "m6i.large on-demand": 4}
    assert effective["summary"]["cost_usd"] == 0.6691  # dearer at list prices ...
    assert effective["summary"]["effective_cost_usd"] == 0.3947  # ... and $0.2057 (34%) cheaper in what is paid
    assert [r["summary"]["nodes_launched"] for r in doc["runs"]] == [10, 10]
    assert [r["summary"]["unscheduled_pods_at_end"] for r in doc["runs"]] == [0, 0]


def test_table_puts_the_dollars_side_by_side(doc) -> None:
    lines = render_pricing_comparison(doc).splitlines()
    assert lines[0].split("  ")[0] == "scenario committed-spend (60m, seed 20)"
    rows = {line.split("  ")[0]: line.split()[-2:] for line in lines[2:-1]}
    assert rows["paid at list prices (USD)"] == ["$0.2500", "$0.6691"]
    assert rows["paid under the policy (USD)"] == ["$0.6004", "$0.3947"]
    assert rows["launched m6i.large on-demand"] == ["0", "4"]
    assert lines[-1] == "billed under example (both runs)"


def test_compare_pricing_needs_a_policy_and_a_scenario() -> None:
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIO), "--compare-pricing"])
    assert out.exit_code == 2
    assert out.stderr.strip().splitlines()[-1].startswith("error: --compare-pricing: needs --pricing FILE")
    out = CliRunner().invoke(cli, ["simulate", "-f", str(POLICY), "--compare-pricing"])
    assert out.exit_code == 2


def test_make_demo_shows_this_comparison() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert [argv[argv.index("simulate"):] for _, argv in demo.steps() if "--compare-pricing" in argv] == [
        ["simulate", "--scenario", "examples/scenarios/committed-spend.yaml", "--pricing",
         "examples/pricing/savings-plan.yaml", "--compare-pricing", "--output", "table"]]
