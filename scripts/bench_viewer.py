#!/usr/bin/env python3
"""Benchmark ``nodewright nodes`` at scale: building the view and drawing one screen page.

Builds an in-memory cluster of N nodes (4 NodePools, m5/c5/r5 types, 20 pods per node), then times: the first
view (every pod and node converted through the state models), a rebuild with nothing changed (the models'
cache), a rebuild after one pod changed (what a watch event costs), and rendering one 50-line page with rich.
Prints a table in milliseconds (median of 5).

Usage: ``.venv/bin/python scripts/bench_viewer.py [--nodes 1000]``
"""

from __future__ import annotations

import argparse
import io
import time

from bench_state_metrics import _median_ms  # scripts/: one timing helper
from rich.console import Console

from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.state.cluster import snapshot
from nodewright.viewer.render import Style, render
from nodewright.viewer.view import Pricer, build_view

TYPES = (("m5.large", "2", "8Gi"), ("c5.xlarge", "4", "8Gi"), ("r5.large", "2", "16Gi"))


def cluster(nodes: int, pods_per_node: int) -> InMemoryCluster:
    c = InMemoryCluster(clock=lambda: 1_800_000_000.0)
    for p in range(4):
        c.create(r.NODEPOOLS, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"pool-{p}"},
                               "spec": {"limits": {"cpu": "10000"}, "template": {"spec": {"requirements": [],
                                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                         "name": "default"}}}}})
    for n in range(nodes):
        it, cpu, mem = TYPES[n % 3]
        name = f"ip-10-{n // 250}-{n % 250}"
        c.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "karpenter.sh/nodepool": f"pool-{n % 4}", "node.kubernetes.io/instance-type": it,
            "karpenter.sh/capacity-type": "spot" if n % 2 else "on-demand", "topology.kubernetes.io/zone": "us-east-1a"}},
            "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "58"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
        for i in range(pods_per_node):
            c.create(r.PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-{i}", "namespace": "default"},
                              "spec": {"nodeName": name, "containers": [{"name": "a", "image": "x", "resources": {
                                  "requests": {"cpu": "50m", "memory": "128Mi"}}}]}, "status": {"phase": "Running"}})
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    args = parser.parse_args()
    c = cluster(args.nodes, args.pods_per_node)
    pricer = Pricer()
    start = time.perf_counter()
    view = build_view(snapshot(c), pricer, 1_800_000_000.0)
    first = (time.perf_counter() - start) * 1000
    unchanged = _median_ms(lambda: build_view(snapshot(c), pricer, 1_800_000_000.0))

    def one_pod_changed() -> None:
        c.patch_status(r.PODS, "ip-10-0-0-0", {"phase": "Running", "podIP": str(time.perf_counter())}, "default")
        build_view(snapshot(c), pricer, 1_800_000_000.0)

    changed = _median_ms(one_pod_changed)

    def draw() -> None:
        Console(file=io.StringIO(), width=180, height=50).print(render(view, Style(), height=50)[0])

    drawn = _median_ms(draw)
    print(f"nodewright nodes: {args.nodes} nodes, {args.nodes * args.pods_per_node} pods")
    print(f"{'step':<34}{'ms':>10}")
    for step, ms in (("first view (models converted)", first), ("rebuild, nothing changed", unchanged),
                     ("rebuild after one pod changed", changed), ("draw one 50-line page (rich)", drawn)):
        print(f"{step:<34}{ms:>10.1f}")


if __name__ == "__main__":
    main()
