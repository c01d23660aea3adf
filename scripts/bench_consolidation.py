#!/usr/bin/env python3
"""Benchmark: consolidation decisions over synthetic clusters of 100, 1,000 and 5,000 nodes.

Each cluster is built from the bundled us-east-1 catalog: on-demand nodes of the m5/c5/r5 families
(xlarge/2xlarge/4xlarge) filled 10-85% with web-like pods (100m-2 cpu, 128Mi-4Gi) of 20 deployments.
For each size the script times one full pass of :func:`nodewright.disruption.decide` (emptiness, drift,
multi-node, single-node; here multi-node wins) and a single-node-only pass, and prints decision time,
candidates evaluated, full scheduling simulations and USD/hour saved. Targets (issue 6, one core):
1,000 nodes < 5 s, 5,000 nodes < 30 s.

Then kubernetes-sigs/karpenter#1962 ("cheaper combinations"): c5a.xlarge nodes, memory-full and half idle on CPU
(three 650m/2Gi pods each), consolidated to the end (:func:`nodewright.disruption.replay.converge`) in a NodePool
of c5a/m6a xlarge and in the report's NodePool (c5a, c6a, m6a, m5a, c7a, r6a, r5a, r4; large to 2xlarge):
nodes and $/h before and after, the moves and the types left.

With ``--pricing FILE`` (a PricingPolicy) the synthetic passes decide on effective marginal prices (what that
costs in time; docs/pricing.md#consolidation).

Run: ``.venv/bin/python scripts/bench_consolidation.py [--sizes 100,1000,5000] [--seed 7] [--pricing FILE]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodewright.api import labels as L  # noqa: E402
from nodewright.api.nodepool import Budget  # noqa: E402
from nodewright.cloud.catalog import load_instance_types  # noqa: E402
from nodewright.disruption import (  # noqa: E402
    MULTI_NODE,
    SINGLE_NODE,
    ClusterView,
    ConsolidationOptions,
    DecisionOptions,
    Node,
    Pool,
    decide,
)
from nodewright.disruption.replay import converge  # noqa: E402
from nodewright.disruption.simulation import Simulator  # noqa: E402
from nodewright.pricing import load_pricing_policy  # noqa: E402
from nodewright.scheduling import ExistingNode, NodePoolSpec, Pod, Requirement, Requirements  # noqa: E402

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
NODE_TYPES = ("m5.xlarge", "m5.2xlarge", "c5.xlarge", "c5.2xlarge", "r5.xlarge", "m5.4xlarge")
NOW = 1_784_548_800.0


def build(n: int, seed: int) -> ClusterView:
    rng = random.Random(seed)
    types = load_instance_types("us-east-1", zones=ZONES)
    by_name = {it.name: it for it in types}
    reqs = Requirements([
        Requirement(L.NODEPOOL, False, ("default",)),
        Requirement(L.CAPACITY_TYPE, False, ("on-demand",)),
        Requirement(L.ARCH, False, ("amd64",)),
        Requirement(L.INSTANCE_CATEGORY, False, ("c", "m", "r")),
    ])
    pool = Pool("default", NodePoolSpec("default", reqs, labels={L.NODEPOOL: "default"}), types,
                budgets=[Budget(nodes="100%")])
    shapes = [(rng.choice([100, 250, 500, 1000, 2000]), rng.choice([128, 256, 512, 1024, 2048, 4096]) * 2**20)
              for _ in range(20)]
    nodes = []
    for i in range(n):
        it = by_name[rng.choice(NODE_TYPES)]
        alloc = it.allocatable()
        zone = rng.choice(ZONES)
        fill = rng.uniform(0.10, 0.85)
        name = f"ip-10-0-{i // 250}-{i % 250}"
        pods: list[Pod] = []
        cpu = mem = 0
        while True:
            d = rng.randrange(len(shapes))
            c, m = shapes[d]
            if pods and ((cpu + c) > alloc["cpu"] * fill or (mem + m) > alloc["memory"] * fill):
                break
            cpu, mem = cpu + c, mem + m
            pods.append(Pod(namespace="default", name=f"app{d}-{i}-{len(pods)}", labels={"app": f"app{d}"},
                            requests={"cpu": c, "memory": m, "pods": 1}, node_name=name))
        labels = {L.NODEPOOL: "default", L.INSTANCE_TYPE: it.name, L.ZONE: zone, L.CAPACITY_TYPE: "on-demand",
                  **it.labels}
        price = next(o.price for o in it.offerings if o.zone == zone and o.capacity_type == "on-demand")
        view = ExistingNode(name=name, labels=labels, allocatable=alloc, pods=pods, price=price)
        nodes.append(Node(name, f"{name}-claim", "default", view, pods, created=NOW - 86_400, price=price,
                          expire_after=720 * 3600.0))
    return ClusterView(nodes=nodes, pools={"default": pool})


def run(view: ClusterView, options: DecisionOptions | None, label: str) -> tuple[str, ...]:
    simulator = Simulator(view)
    started = time.perf_counter()
    decision = decide(view, NOW, options, simulator)
    elapsed = time.perf_counter() - started
    if decision is None:
        return (label, f"{elapsed:.2f}", "-", "0", str(simulator.calls), "0.00", "no decision")
    return (label, f"{elapsed:.2f}", decision.method, str(decision.evaluated), str(simulator.calls),
            f"{decision.savings:.2f}", decision.message())


def _node(types: dict, name: str, type_name: str, pods: list[Pod]) -> Node:
    it = types[type_name]
    labels = {L.NODEPOOL: "default", L.INSTANCE_TYPE: type_name, L.ZONE: ZONES[0], L.CAPACITY_TYPE: "on-demand",
              L.HOSTNAME: name, **it.labels}
    bound = [Pod(namespace="default", name=p.name, labels=p.labels, requests=p.requests, node_name=name) for p in pods]
    price = next(o.price for o in it.offerings if o.zone == ZONES[0] and o.capacity_type == "on-demand")
    view = ExistingNode(name=name, labels=labels, allocatable=it.allocatable(), pods=list(bound), price=price)
    return Node(name, f"{name}-claim", "default", view, bound, created=NOW - 86_400, price=price)


def cheaper_combinations(n: int) -> list[tuple[str, ...]]:
    """karpenter#1962 rows: ``n`` half-idle c5a.xlarge consolidated to the end, in two NodePools."""
    types = {it.name: it for it in load_instance_types("us-east-1", zones=ZONES[:1])}
    rows = []
    for label, families, sizes in (("c5a/m6a xlarge", ("c5a", "m6a"), ("xlarge",)),
                                   ("the report's pool", ("c5a", "c6a", "m6a", "m5a", "c7a", "r6a", "r5a", "r4"),
                                    ("large", "xlarge", "2xlarge"))):
        reqs = Requirements([Requirement(L.NODEPOOL, False, ("default",)),
                             Requirement(L.CAPACITY_TYPE, False, ("on-demand",)),
                             Requirement(L.INSTANCE_FAMILY, False, families),
                             Requirement(L.INSTANCE_SIZE, False, sizes)])
        pool = Pool("default", NodePoolSpec("default", reqs, labels={L.NODEPOOL: "default"}), list(types.values()),
                    budgets=[Budget(nodes="100%")])
        pods = [[Pod(namespace="default", name=f"app-{i}-{j}", labels={"app": "app"},
                     requests={"cpu": 650, "memory": 2 * 2**30, "pods": 1}) for j in range(3)] for i in range(n)]
        nodes = [_node(types, f"c5a-{i}", "c5a.xlarge", pods[i]) for i in range(n)]
        view = ClusterView(nodes=nodes, pools={"default": pool})
        started = time.perf_counter()
        final, done = converge(view, NOW, lambda name, t, p: _node(types, name, t, list(p)))
        elapsed = time.perf_counter() - started
        left: dict[str, int] = {}
        for node in final.nodes:
            left[node.instance_type] = left.get(node.instance_type, 0) + 1
        rows.append((label, f"{n} x c5a.xlarge", f"${sum(x.price for x in view.nodes):.4f}/h",
                     str(len(final.nodes)), f"${sum(x.price for x in final.nodes):.4f}/h", str(len(done)),
                     f"{elapsed:.2f}", ", ".join(f"{c} {t}" for t, c in sorted(left.items()))))
    return rows


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pricing", default=None, help="a PricingPolicy file: decide on effective prices")
    parser.add_argument("--combinations", type=int, default=24, help="c5a.xlarge nodes of the karpenter#1962 case")
    args = parser.parse_args()
    policy = load_pricing_policy(args.pricing) if args.pricing else None
    header = ("nodes", "pass", "seconds", "method", "evaluated", "simulations", "$/h saved", "decision")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        view = build(n, args.seed)
        pods = sum(len(node.pods) for node in view.nodes)
        cost = sum(node.price for node in view.nodes)
        for label, methods in (("all methods", None), ("multi-node", (MULTI_NODE,)), ("single-node", (SINGLE_NODE,))):
            opts = DecisionOptions(consolidation=ConsolidationOptions(pricing=policy),
                                   **({} if methods is None else {"methods": methods}))
            row = run(view, opts, label)
            rows.append((f"{n} ({pods} pods, ${cost:.0f}/h)", *row))
    _table(header, rows)
    print("\nkubernetes-sigs/karpenter#1962: half-idle c5a.xlarge into fewer, bigger-memory nodes")
    _table(("nodepool", "before", "before $/h", "after nodes", "after $/h", "moves", "seconds", "left"),
           cheaper_combinations(args.combinations))


if __name__ == "__main__":
    main()
