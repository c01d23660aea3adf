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

**Realistic clusters** (issue 30, ``--realistic 1000,5000,10000``; :mod:`bench_cluster`): 24 NodePools with
different requirements, taints and weights, default budgets (10%), web / batch / stateful workloads with PDBs,
zone and hostname spread, hostname anti-affinity, DaemonSets and do-not-disrupt pods, on-demand and spot. Per
size and method (full pass, multi-node only, single-node only), over ``--seeds`` seeds: CPU seconds (p50 and
max), candidates evaluated, full simulations, $/h saved, nodes and pods disrupted, the most pods one replacement
takes, how many seeds ended on the time budget, and the process's peak RSS after the size.

**Optimality** (``--optimum-cases N``): clusters of 12-40 nodes (one team: three NodePools, default budgets);
the full pass's saving against the best single move of the same move space, found exhaustively (every set of
underutilized candidates within every pool's budget, best-first by the set's price -- an upper bound of its
saving -- each judged exactly as consolidation judges a move: screen, simulation with at most one new node,
replacement rules). Cases whose space exceeds 2 million sets are skipped.

Run: ``.venv/bin/python scripts/bench_consolidation.py [--sizes 100,1000,5000] [--seed 7] [--pricing FILE]
[--realistic 1000,5000,10000] [--seeds 10] [--optimum-cases 20]``
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cluster  # noqa: E402

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
    decide_pass,
)
from nodewright.disruption.budgets import budget_mapping  # noqa: E402
from nodewright.disruption.consolidation import _Search, underutilized_candidates  # noqa: E402
from nodewright.disruption.model import REASON_UNDERUTILIZED, Decision  # noqa: E402
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


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _moved_to_replacement(decision: Decision | None) -> int:
    return max((len(p.pods) for p in decision.replacements), default=0) if decision is not None else 0


PASSES = (("full pass", None), ("multi-node", (MULTI_NODE,)), ("single-node", (SINGLE_NODE,)))


def realistic_rows(sizes: list[int], seeds: int, policy: object, first_seed: int = 1) -> list[tuple[str, ...]]:
    """One row per (size, pass) over ``seeds`` seeds (see module docstring)."""
    rows = []
    for n in sizes:
        stats: dict[str, list[tuple[float, int, int, float, int, int, int, bool]]] = {p: [] for p, _ in PASSES}
        pods = cost = 0.0
        for seed in range(first_seed, first_seed + seeds):
            view = bench_cluster.realistic(n, seed)
            pods += sum(len(node.pods) for node in view.nodes) / seeds
            cost += sum(node.price for node in view.nodes) / seeds
            for label, methods in PASSES:
                opts = DecisionOptions(consolidation=ConsolidationOptions(pricing=policy),  # type: ignore[arg-type]
                                       **({} if methods is None else {"methods": methods}))
                simulator = Simulator(view)
                started = time.process_time()
                outcome = decide_pass(view, bench_cluster.NOW, opts, simulator)
                elapsed = time.process_time() - started
                d = outcome.decision
                stats[label].append((elapsed, d.evaluated if d else 0, simulator.calls, d.savings if d else 0.0,
                                     len(d.candidates) if d else 0, sum(len(c.pods) for c in d.candidates) if d else 0,
                                     _moved_to_replacement(d), bool(outcome.stopped_early)))
        rss = _rss_mib()
        for label, _ in PASSES:
            st = stats[label]
            times = [x[0] for x in st]
            rows.append((f"{n} ({pods:.0f} pods, ${cost:.0f}/h)", label, f"{statistics.median(times):.2f}",
                         f"{max(times):.2f}", f"{statistics.median(x[1] for x in st):.0f}",
                         f"{statistics.median(x[2] for x in st):.0f}", f"{statistics.median(x[3] for x in st):.2f}",
                         f"{statistics.median(x[4] for x in st):.0f}", f"{statistics.median(x[5] for x in st):.0f}",
                         str(max(x[6] for x in st)), str(sum(x[7] for x in st)), f"{rss:.0f}"))
    return rows


def exhaustive_optimum(view: ClusterView, limit: int = 2_000_000) -> tuple[float, int] | None:
    """The best saving of one consolidation move over every within-budget set of underutilized candidates, and the
    simulations spent; None when the space exceeds ``limit`` sets (see module docstring)."""
    now = bench_cluster.NOW
    allowed = budget_mapping(view.pools, view.nodes, REASON_UNDERUTILIZED, now)
    by_pool: dict[str, list[Node]] = {}
    for node in underutilized_candidates(view, now):
        by_pool.setdefault(node.nodepool, []).append(node)
    choices = []
    for pool, nodes in by_pool.items():
        k = min(len(nodes), allowed.get(pool, 0))
        choices.append([c for r in range(k + 1) for c in itertools.combinations(nodes, r)])
    size = 1
    for c in choices:
        size *= len(c)
    if size > limit:
        return None
    heap = [(-sum(n.price for part in combo for n in part), i, combo)
            for i, combo in enumerate(itertools.product(*choices))]
    heapq.heapify(heap)
    simulator = Simulator(view)
    search = _Search(view, simulator, ConsolidationOptions())
    best = 0.0
    while heap:
        neg, _, combo = heapq.heappop(heap)
        if -neg <= best + 1e-9:
            break
        nodes = [n for part in combo for n in part]
        if not nodes:
            continue
        option = search.option(nodes, MULTI_NODE if len(nodes) > 1 else SINGLE_NODE)
        if option is not None and option.savings > best:
            best = option.savings
    return best, simulator.calls


def optimum_rows(cases: int) -> tuple[list[tuple[str, ...]], list[float]]:
    rows, ratios = [], []
    rng = random.Random(30)
    for case in range(cases):
        n = rng.randint(12, 40)
        view = bench_cluster.realistic(n, 1000 + case, teams=1)
        found = exhaustive_optimum(view)
        if found is None:
            rows.append((str(case), str(n), "-", "-", "-", "space too large"))
            continue
        optimum, sims = found
        d = decide(view, bench_cluster.NOW)
        got = d.savings if d is not None else 0.0
        ratio = 1.0 if optimum <= 1e-9 else got / optimum
        ratios.append(ratio)
        rows.append((str(case), str(n), f"{got:.4f}", f"{optimum:.4f}", f"{ratio:.3f}",
                     f"{sims} sims; {d.message() if d else 'no decision'}"))
    return rows, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pricing", default=None, help="a PricingPolicy file: decide on effective prices")
    parser.add_argument("--combinations", type=int, default=24, help="c5a.xlarge nodes of the karpenter#1962 case")
    parser.add_argument("--realistic", default="1000,5000,10000", help="sizes of the realistic clusters ('' skips)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per realistic size")
    parser.add_argument("--optimum-cases", type=int, default=20, help="small clusters compared with the optimum")
    args = parser.parse_args()
    policy = load_pricing_policy(args.pricing) if args.pricing else None
    header = ("nodes", "pass", "seconds", "method", "evaluated", "simulations", "$/h saved", "decision")
    rows = []
    for n in (int(s) for s in args.sizes.split(",") if s):
        view = build(n, args.seed)
        pods = sum(len(node.pods) for node in view.nodes)
        cost = sum(node.price for node in view.nodes)
        for label, methods in (("all methods", None), ("multi-node", (MULTI_NODE,)), ("single-node", (SINGLE_NODE,))):
            opts = DecisionOptions(consolidation=ConsolidationOptions(pricing=policy),
                                   **({} if methods is None else {"methods": methods}))
            row = run(view, opts, label)
            rows.append((f"{n} ({pods} pods, ${cost:.0f}/h)", *row))
    if args.sizes:
        _table(header, rows)
    if args.realistic:
        print(f"\nrealistic clusters (24 NodePools, default budgets; {args.seeds} seeds; CPU seconds)")
        _table(("nodes", "pass", "p50 s", "max s", "evaluated", "simulations", "$/h saved", "nodes", "pods",
                "max pods/replacement", "timeouts", "peak RSS MiB"),
               realistic_rows([int(s) for s in args.realistic.split(",")], args.seeds, policy))
    if args.optimum_cases:
        rows, ratios = optimum_rows(args.optimum_cases)
        print("\nsavings vs the exhaustive optimum of the same move space (12-40 nodes, 3 NodePools)")
        _table(("case", "nodes", "found $/h", "optimum $/h", "ratio", "note"), rows)
        if ratios:
            ordered = sorted(ratios)
            p10 = ordered[len(ordered) - -(-9 * len(ordered) // 10)]
            print(f"ratio: min {ordered[0]:.3f}, median {statistics.median(ordered):.3f}, "
                  f"90% of cases >= {p10:.3f} ({len(ordered)} cases)")
    if not args.combinations:
        return
    print("\nkubernetes-sigs/karpenter#1962: half-idle c5a.xlarge into fewer, bigger-memory nodes")
    _table(("nodepool", "before", "before $/h", "after nodes", "after $/h", "moves", "seconds", "left"),
           cheaper_combinations(args.combinations))


if __name__ == "__main__":
    main()
