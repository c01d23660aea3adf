#!/usr/bin/env python3
"""Benchmark the per-pass cost of :class:`nodewright.controllers.state_metrics.StateMetricsController`.

Builds an in-memory cluster of N managed nodes (4 allocatable resources each) and 20 pods per node, then
times one pass in three situations, next to the cost of the snapshot every pass takes anyway:

* ``same snapshot``: the simulator's cached snapshot handed back unchanged (an identity check);
* ``new snapshot, unchanged``: a fresh snapshot, no node changed (per-node resourceVersion cache hits,
  one pass over the pods for startups);
* ``all nodes changed``: every Node patched since the last pass (every series recomputed).

Prints a table in milliseconds (median of the repeats).

Usage: ``.venv/bin/python scripts/bench_state_metrics.py``
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from nodewright.controllers.common import Context
from nodewright.controllers.state_metrics import StateMetricsController
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics
from nodewright.state.cluster import snapshot

NOW = 1_784_548_800.0


def _median_ms(fn: Callable[[], object], repeat: int = 7) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _cluster(nodes: int) -> InMemoryCluster:
    cluster = InMemoryCluster(lambda: NOW, seed=1)
    for n in range(nodes):
        cluster.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"ip-{n}", "labels": {
            "karpenter.sh/nodepool": "general", "node.kubernetes.io/instance-type": "m6g.xlarge",
            "karpenter.sh/capacity-type": "spot", "topology.kubernetes.io/zone": "us-east-1a",
            "kubernetes.io/arch": "arm64"}}, "status": {"allocatable": {
                "cpu": "3920m", "memory": "15136Mi", "pods": "58", "ephemeral-storage": "18242267924"}}})
        for p in range(20):
            cluster.create(r.PODS, {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": f"p-{n}-{p}", "namespace": "default"},
                                    "spec": {"nodeName": f"ip-{n}"}, "status": {"phase": "Running"}})
    return cluster


def _row(nodes: int) -> str:
    cluster = _cluster(nodes)
    ctl = StateMetricsController(Context(cluster, None, lambda: NOW, Metrics()))  # type: ignore[arg-type]
    state = snapshot(cluster)
    ctl.reconcile(state)
    snap_ms = _median_ms(lambda: snapshot(cluster))
    same_ms = _median_ms(lambda: ctl.reconcile(state))
    states = [snapshot(cluster) for _ in range(7)]
    unchanged_ms = _median_ms(lambda: ctl.reconcile(states.pop()))
    timings: list[float] = []
    for _ in range(5):
        for n in range(nodes):
            cluster.patch(r.NODES, f"ip-{n}", {"metadata": {"annotations": {"touch": str(time.perf_counter())}}})
        fresh = snapshot(cluster)
        start = time.perf_counter()
        ctl.reconcile(fresh)
        timings.append((time.perf_counter() - start) * 1000)
    return (f"{nodes:>6} {nodes * 20:>7} {snap_ms:>10.2f} {same_ms:>14.4f} {unchanged_ms:>15.2f} "
            f"{statistics.median(timings):>18.2f}")


def main() -> None:
    print(f"{'nodes':>6} {'pods':>7} {'snapshot':>10} {'same snapshot':>14} {'new, unchanged':>15} "
          f"{'all nodes changed':>18}")
    for nodes in (50, 200, 1000):
        print(_row(nodes))


if __name__ == "__main__":
    main()
