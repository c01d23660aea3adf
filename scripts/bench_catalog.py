#!/usr/bin/env python3
"""Benchmark the bundled instance-type catalog: cold and cached ``load_instance_types`` per region.

Prints a table: region, instance types returned, offerings, cold load (caches cleared: read + decompress the
bundle, derive labels/allocatable/offerings for every type) and a cached call, in milliseconds.

Usage: ``.venv/bin/python scripts/bench_catalog.py``
"""

from __future__ import annotations

import statistics
import time

from nodewright.cloud import catalog, prices


def _clear_caches() -> None:
    catalog._load_cached.cache_clear()
    catalog._specs.cache_clear()
    catalog._region_offerings.cache_clear()
    prices.on_demand_prices.cache_clear()


def _time_ms(fn: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    print(f"{'region':16s} {'types':>6s} {'offerings':>10s} {'cold ms':>9s} {'cached ms':>10s}")
    for region in catalog.bundled_regions():

        def cold(region: str = region) -> None:
            _clear_caches()
            catalog.load_instance_types(region)

        cold_ms = _time_ms(cold, 5)
        types = catalog.load_instance_types(region)
        cached_ms = _time_ms(lambda region=region: catalog.load_instance_types(region), 200)
        offerings = sum(len(t.offerings) for t in types)
        print(f"{region:16s} {len(types):6d} {offerings:10d} {cold_ms:9.1f} {cached_ms:10.3f}")


if __name__ == "__main__":
    main()
