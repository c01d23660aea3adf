"""Emptiness: delete nodes with no reschedulable pods once ``consolidateAfter`` has passed.

Karpenter v1's ``Emptiness`` method: candidates that pass the candidate rules and the consolidation rules for
reason ``Empty`` (``consolidateAfter`` since the last pod event, the min-node-lifetime churn guard) and carry
no pod that would have to move (DaemonSet pods do not count) are deleted together, as many as the pools'
``Empty`` budgets allow. ``WhenEmpty`` pools are only ever disrupted by this method (and drift/expiration).
"""

from __future__ import annotations

from nodewright.disruption.budgets import budget_mapping, within_budget
from nodewright.disruption.candidates import base_problem, by_disruption_cost, consolidation_problem
from nodewright.disruption.model import EMPTINESS, REASON_EMPTY, ClusterView, Decision, Node


def empty_candidates(view: ClusterView, now: float) -> list[Node]:
    """Empty nodes that pass every rule for reason ``Empty``, by ascending disruption cost."""
    out = []
    for node in view.nodes:
        if node.pods:
            continue
        if base_problem(node, view.pools, view.pdbs, REASON_EMPTY) is not None:
            continue
        if consolidation_problem(node, view.pools[node.nodepool], now, REASON_EMPTY) is not None:
            continue
        out.append(node)
    return by_disruption_cost(out, now)


def emptiness(view: ClusterView, now: float) -> Decision | None:
    """Delete every empty candidate the ``Empty`` budgets allow (None when there is none)."""
    candidates = empty_candidates(view, now)
    chosen = within_budget(candidates, budget_mapping(view.pools, view.nodes, REASON_EMPTY, now))
    if not chosen:
        return None
    return Decision(EMPTINESS, REASON_EMPTY, chosen, evaluated=len(candidates))


def validate_emptiness(decision: Decision, nodes: list[Node], view: ClusterView, now: float) -> Decision | None:
    """Emptiness re-checked on a fresh view: every candidate still empty and still past ``consolidateAfter``."""
    ok = all(not n.pods and consolidation_problem(n, view.pools[n.nodepool], now, REASON_EMPTY) is None
             for n in nodes)
    return Decision(EMPTINESS, decision.reason, nodes, evaluated=decision.evaluated) if ok else None
