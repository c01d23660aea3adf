"""Consolidation replacements under NodePool ``limits`` (issue 26, item 1).

Karpenter's ``SimulateScheduling`` builds its scheduler over the active nodes minus the candidates, so what the pool
keeps counts against its limits and a replacement's candidate types are filtered by what remains (``subtractMax``).
Before the fix the simulations ignored what the pool owns: a replacement could take the pool over its limits."""

from __future__ import annotations

from dataclasses import replace

from nodewright.disruption import decide

from .helpers import LARGE, NOW, cluster, node, pod, pool


def limited(cpu: int):  # type: ignore[no-untyped-def]
    p = pool()
    return replace(p, spec=replace(p.spec, limits={"cpu": cpu}))


def nodes():  # type: ignore[no-untyped-def]
    # An 8-vCPU node the pool keeps (its pod may not move) and an 8-vCPU node whose 3-vCPU pod fits a c.medium.
    return [node("keeper", LARGE, [pod("k-0", 7000)], do_not_disrupt=True), node("big", LARGE, [pod("a-0", 3000)])]


def test_replacement_candidates_leave_the_pool_within_its_limits() -> None:
    """12 vCPU of limits, 8 kept: the replacement may list types of at most 4 vCPU (c.medium, not c.large)."""
    d = decide(cluster(nodes(), [limited(12000)]), NOW)
    assert d is not None and d.method == "single-node-consolidation"
    assert [c.name for c in d.candidates] == ["big"]
    assert [it.name for it in d.replacements[0].instance_types] == ["c.medium"]
    kept = 8000
    assert kept + max(it.capacity["cpu"] for it in d.replacements[0].instance_types) <= 12000


def test_no_replacement_when_the_kept_nodes_leave_no_room() -> None:
    """10 vCPU of limits, 8 kept: 2 vCPU remain, no type holding the 3-vCPU pod fits, so nothing is replaced."""
    assert decide(cluster(nodes(), [limited(10000)]), NOW) is None
