#!/usr/bin/env python3
"""Benchmark the effective-price engine: what a scheduling pass would pay to price every candidate offering.

For fleets of 10, 100 and 500 on-demand/spot nodes under ``examples/pricing/savings-plan.yaml`` (plus a Compute
Savings Plan and regional RIs so every step runs), prints the time of one ``bill`` and of ``FleetPrices``
marginal prices for every on-demand and spot offering of the bundled us-east-1 catalog in one zone.

Usage: ``.venv/bin/python scripts/bench_pricing.py``
"""

from __future__ import annotations

import time
from pathlib import Path

from nodewright.cloud.catalog import load_instance_types, price_table
from nodewright.pricing import PricingEngine, Usage, load_pricing_policy, parse_pricing_policy

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    doc = load_pricing_policy(ROOT / "examples" / "pricing" / "savings-plan.yaml").to_manifest()
    doc["spec"]["savingsPlans"].append({"type": "Compute", "commitmentUsdPerHour": 2.0, "discountPercent": 20})
    doc["spec"]["reservedInstances"].append({"instanceType": "m5.xlarge", "region": "us-east-1", "count": 20})
    engine = PricingEngine(parse_pricing_policy(doc), price_table("us-east-1"))
    types = [t.name for t in load_instance_types("us-east-1")]
    candidates = [Usage(t, "us-east-1a", c) for t in types for c in ("on-demand", "spot")]
    shapes = ["m5.large", "m5.xlarge", "m6i.large", "c6i.xlarge", "r6i.large", "t3.medium", "c5a.xlarge"]
    print(f"{'fleet':>6s} {'bill ms':>8s} {'offerings':>10s} {'all marginal ms':>16s} {'per offering us':>16s}")
    for size in (10, 100, 500):
        fleet = [Usage(shapes[i % len(shapes)], f"us-east-1{'abc'[i % 3]}", "spot" if i % 4 == 0 else "on-demand")
                 for i in range(size)]
        start = time.perf_counter()
        engine.bill(fleet)
        bill_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        quote = engine.for_fleet(fleet)
        for usage in candidates:
            quote.marginal_price(usage)
        all_ms = (time.perf_counter() - start) * 1000
        print(f"{size:6d} {bill_ms:8.2f} {len(candidates):10d} {all_ms:16.1f} {all_ms * 1000 / len(candidates):16.1f}")


if __name__ == "__main__":
    main()
