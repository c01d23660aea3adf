"""Apply decisions to a :class:`ClusterView` without a cluster: what a consolidation leaves behind, pass after pass.

For benchmarks and tests that follow consolidation to its end (``scripts/bench_consolidation.py``): the
candidates go, the pods the simulation moved join the nodes it put them on, and each replacement becomes a node
of its most likely type (``plan.instance_type``) running its planned pods. Nodes are made by the caller
(``make_node(name, instance type name, pods)``), which knows how to price and label them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from nodewright.disruption.decide import DecisionOptions, decide
from nodewright.disruption.model import ClusterView, Decision, Node
from nodewright.scheduling import Pod

MakeNode = Callable[[str, str, Sequence[Pod]], Node]


def apply_decision(view: ClusterView, decision: Decision, make_node: MakeNode, prefix: str = "r") -> ClusterView:
    """The view after ``decision``; replacements are named ``<prefix>-<i>``."""
    gone = {c.name for c in decision.candidates}
    moved = decision.result.existing if decision.result is not None else {}
    nodes = []
    for node in view.nodes:
        if node.name in gone:
            continue
        extra = moved.get(node.name, [])
        nodes.append(make_node(node.name, node.instance_type, [*node.pods, *extra]) if extra else node)
    for i, plan in enumerate(decision.replacements):
        nodes.append(make_node(f"{prefix}-{i}", plan.instance_type.name, list(plan.pods)))
    return dataclasses.replace(view, nodes=nodes)


def converge(view: ClusterView, now: float, make_node: MakeNode, options: DecisionOptions | None = None,
             limit: int = 100) -> tuple[ClusterView, list[Decision]]:
    """Decide and apply until no decision is left (at most ``limit`` passes); the final view and the decisions.

    Raises:
        RuntimeError: still deciding after ``limit`` passes.
    """
    done: list[Decision] = []
    for _ in range(limit):
        decision = decide(view, now, options)
        if decision is None:
            return view, done
        done.append(decision)
        view = apply_decision(view, decision, make_node, f"r{len(done)}")
    raise RuntimeError(f"consolidation still deciding after {limit} passes")
