"""One pass of disruption decisions: the methods in Karpenter's order, the first that finds work acts.

:func:`decide` is what the disruption controller (and the simulator, and the benchmark) calls: pure over a
:class:`~nodewright.disruption.model.ClusterView` and ``now``. :func:`validate` re-checks a decision on a fresh
view before it is executed (Karpenter waits 15 s and re-validates, so a burst of pod churn does not act on
stale data).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from nodewright.disruption.budgets import budget_mapping
from nodewright.disruption.candidates import base_problem, pdb_overlap_blocks
from nodewright.disruption.consolidation import (
    ConsolidationOptions,
    multi_node_search,
    single_node_search,
    validate_consolidation,
)
from nodewright.disruption.drift import drift, validate_drift
from nodewright.disruption.emptiness import emptiness, validate_emptiness
from nodewright.disruption.expiration import expiration, validate_expiration
from nodewright.disruption.model import (
    DRIFT,
    EMPTINESS,
    EXPIRATION,
    MULTI_NODE,
    SINGLE_NODE,
    ClusterView,
    Decision,
)
from nodewright.disruption.pricing import Skip
from nodewright.disruption.simulation import Simulator

#: The graceful methods in the order they are tried.
METHODS = (EMPTINESS, DRIFT, MULTI_NODE, SINGLE_NODE)


@dataclass(frozen=True, slots=True)
class DecisionOptions:
    """Tunables of one pass.

    Attributes:
        consolidation: multi/single-node options.
        drift_simulations: drifted candidates simulated per pass at most.
        methods: graceful methods to run, in order (default all of :data:`METHODS`).
    """

    consolidation: ConsolidationOptions = field(default_factory=ConsolidationOptions)
    drift_simulations: int = 10
    methods: tuple[str, ...] = METHODS


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What one pass of :func:`decide_pass` found.

    Attributes:
        decision: the graceful decision, or None.
        stopped_early: the methods (:data:`MULTI_NODE`, :data:`SINGLE_NODE`) whose time budget
            (``ConsolidationOptions.multi_node_timeout`` / ``single_node_timeout``) ran out before their search
            was done, in the order they ran (the disruption controller counts them as Karpenter's consolidation
            timeouts; multi-node then acted on the best valid move it had found).
        skipped: consolidation moves found feasible but not taken for their saving (below the NodePool's
            minimum saving, or nothing saved at effective prices), in the order found.
        blocked: node name -> why simulations moving its pods failed (pods no node can take again, such as pods
            with DRA requirements; :attr:`Simulator.blocked`).
    """

    decision: Decision | None
    stopped_early: tuple[str, ...] = ()
    skipped: tuple[Skip, ...] = ()
    blocked: Mapping[str, str] = field(default_factory=dict)


def decide(view: ClusterView, now: float, options: DecisionOptions | None = None,
           simulator: Simulator | None = None) -> Decision | None:
    """The graceful decision of this pass (emptiness, drift, multi-node, single-node), or None.

    ``simulator`` may be passed to read its :attr:`~Simulator.calls` afterwards (benchmarks); it must be built
    over the same ``view``.
    """
    return decide_pass(view, now, options, simulator).decision


def decide_pass(view: ClusterView, now: float, options: DecisionOptions | None = None,
                simulator: Simulator | None = None) -> PassOutcome:
    """:func:`decide`, with which consolidation searches their time budget cut short."""
    opts = options or DecisionOptions()
    simulator = simulator or Simulator(view)
    runners: dict[str, Callable[[], tuple[Decision | None, bool]]] = {
        EMPTINESS: lambda: (emptiness(view, now), False),
        DRIFT: lambda: (drift(view, now, simulator, opts.drift_simulations), False),
        MULTI_NODE: lambda: multi_node_search(view, now, simulator, opts.consolidation, skipped),
        SINGLE_NODE: lambda: single_node_search(view, now, simulator, opts.consolidation, skipped),
    }
    stopped: list[str] = []
    skipped: list[Skip] = []
    for method in opts.methods:
        decision, cut_short = runners[method]()
        if cut_short:
            stopped.append(method)
        if decision is not None:
            return PassOutcome(decision, tuple(stopped), tuple(skipped), _blocked(view, simulator))
    return PassOutcome(None, tuple(stopped), tuple(skipped), _blocked(view, simulator))


def _blocked(view: ClusterView, simulator: Simulator) -> dict[str, str]:
    """Nodes whose disruption is blocked: pods several PodDisruptionBudgets select (never evictable), then pods
    no simulation can move again."""
    return {**pdb_overlap_blocks(view.nodes, view.pdbs), **simulator.blocked}


def decide_expiration(view: ClusterView, now: float) -> Decision | None:
    """The forceful expiration decision (not budgeted; see :mod:`nodewright.disruption.expiration`)."""
    return expiration(view, now)


def validate(decision: Decision, view: ClusterView, now: float, options: DecisionOptions | None = None) -> Decision | None:
    """Re-check ``decision`` on a fresh ``view``; the (possibly re-simulated) decision, or None when it no longer
    holds. The checks every graceful method shares are here (a candidate vanished or broke a rule, the budget
    shrank); each method then re-validates its own decision (emptiness: still empty; drift: still drifted and
    its pods still fit; consolidation: still fits and saves at least as much; expiration: still expired).
    """
    opts = options or DecisionOptions()
    by_name = {n.name: n for n in view.nodes}
    fresh = [by_name.get(c.name) for c in decision.candidates]
    if any(n is None for n in fresh):
        return None
    nodes = [n for n in fresh if n is not None]
    if decision.method == EXPIRATION:
        return validate_expiration(decision, nodes, now)
    allowed = budget_mapping(view.pools, view.nodes, decision.reason, now)
    for node in nodes:
        if base_problem(node, view.pools, view.pdbs, decision.reason) is not None:
            return None
        allowed[node.nodepool] = allowed.get(node.nodepool, 0) - 1
    if any(v < 0 for v in allowed.values()):
        return None
    if decision.method == EMPTINESS:
        return validate_emptiness(decision, nodes, view, now)
    if decision.method == DRIFT:
        return validate_drift(decision, nodes, view)
    return validate_consolidation(decision, nodes, view, now, opts.consolidation)
