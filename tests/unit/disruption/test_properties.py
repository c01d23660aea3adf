"""Property tests over random clusters: a decision never disrupts a do-not-disrupt node or pod or a pod whose
PDB allows nothing, never leaves a pod without a place, never raises cost, never exceeds a budget."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodewright.api import labels as L
from nodewright.api.nodepool import Budget
from nodewright.disruption import PDB, decide
from nodewright.disruption.budgets import budget_mapping
from nodewright.disruption.candidates import blocking_pdb, pod_blocks_disruption

from .helpers import CATALOG, NOW, cluster, node, pod, pool

CONSOLIDATION = ("multi-node-consolidation", "single-node-consolidation")


@st.composite
def clusters(draw: Any) -> Any:
    target = draw(st.sampled_from([None, None, 0.6, 0.8]))
    budget = draw(st.sampled_from(["100%", "50%", "1", "0", "20%"]))
    ct = draw(st.sampled_from([("on-demand",), ("spot", "on-demand"), ("spot",)]))
    p = pool(target=target, budgets=[Budget(nodes=budget)], capacity_types=ct)
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        it = draw(st.sampled_from(CATALOG))
        cap = it.allocatable()["cpu"]
        pods = []
        used = 0
        for j in range(draw(st.integers(0, 4))):
            cpu = draw(st.sampled_from([100, 250, 500, 1000, 2000]))
            if used + cpu > cap:
                break
            used += cpu
            ann = {L.DO_NOT_DISRUPT: "true"} if draw(st.integers(0, 9)) == 0 else {}
            app = draw(st.sampled_from(["web", "api", "db"]))
            pods.append(pod(f"{app}-{i}-{j}", cpu, draw(st.sampled_from([128, 512, 1024])), labels={"app": app},
                            annotations=ann))
        node_ct = "spot" if ct == ("spot",) else draw(st.sampled_from(ct))
        nodes.append(node(f"n{i}", it, pods, capacity_type=node_ct, do_not_disrupt=draw(st.integers(0, 9)) == 0))
    pdbs = [PDB("db", "default", {"matchLabels": {"app": "db"}}, draw(st.integers(0, 1)))]
    return cluster(nodes, [p], pdbs=pdbs)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_decisions_respect_every_invariant(view: Any) -> None:
    allowed = {
        reason: budget_mapping(view.pools, view.nodes, reason, NOW) for reason in ("Empty", "Drifted", "Underutilized")
    }
    d = decide(view, NOW)
    if d is None:
        return
    names = [c.name for c in d.candidates]
    assert len(names) == len(set(names))
    # Budgets.
    per_pool: dict[str, int] = {}
    for c in d.candidates:
        per_pool[c.nodepool] = per_pool.get(c.nodepool, 0) + 1
    for pool_name, count in per_pool.items():
        assert count <= allowed[d.reason][pool_name]
    # do-not-disrupt and PDBs.
    for c in d.candidates:
        assert not c.do_not_disrupt
        for p in c.pods:
            assert not pod_blocks_disruption(p)
            assert blocking_pdb(p, view.pdbs) is None
    # Every moved pod has exactly one place, and destinations stay within (target-scaled) allocatable.
    moved = sorted(p.key for c in d.candidates for p in c.pods)
    if moved:
        assert d.result is not None and not d.result.unschedulable
        placed = sorted([p.key for ps in d.result.existing.values() for p in ps]
                        + [p.key for r in d.replacements for p in r.pods])
        assert placed == moved
        target = view.pools["default"].target_utilization or 1.0
        by_name = {n.name: n for n in view.nodes}
        for dest, pods in d.result.existing.items():
            assert dest not in names
            n = by_name[dest]
            for res in ("cpu", "memory"):
                used = n.view.requested().get(res, 0) + sum(p.requests.get(res, 0) for p in pods)
                assert used <= int(n.view.allocatable[res] * target)
    # Cost never rises for consolidation; at most one replacement.
    if d.method in CONSOLIDATION:
        assert len(d.replacements) <= 1
        assert d.replacement_price < d.current_price or not d.replacements
        assert d.savings >= 0
    if d.method == "emptiness":
        assert all(not c.pods for c in d.candidates)
