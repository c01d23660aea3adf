"""nodewright.disruption: which nodes to remove or replace, as pure functions over plain data.

Stable entry points (the disruption controller, the simulator, benchmarks and tests use only these):

- :class:`ClusterView`, :class:`Node`, :class:`Pool`, :class:`NodeClassInfo`, :class:`PDB` -- the inputs;
- :func:`decide` -> :class:`Decision` (or :func:`decide_pass` -> :class:`PassOutcome`, adding which
  consolidation searches the simulation bound cut short) (emptiness, drift, multi-node, single-node consolidation, in that order,
  the first that finds work acts) and :func:`decide_expiration` (forceful, not budgeted);
- :func:`validate` -- re-check a decision on a fresh view before executing it;
- :class:`~nodewright.disruption.pricing.MovePricing` -- the prices consolidation decides by (list, or effective
  under ``ConsolidationOptions.pricing``), and :class:`Skip`, a move skipped for its saving
  (``PassOutcome.skipped``); :mod:`~nodewright.disruption.replay` applies decisions to a view (benchmarks);
- :mod:`nodewright.disruption.budgets`, :mod:`~nodewright.disruption.candidates`,
  :mod:`~nodewright.disruption.drift` for the individual rules (the drift hashes are
  :mod:`nodewright.api.hashing`).

Nothing here reads a clock or a client: ``now`` (epoch seconds) is an argument. Prices are USD/hour.
"""

from nodewright.disruption.budgets import allowed_disruptions, budget_active, budget_mapping
from nodewright.disruption.consolidation import ConsolidationOptions
from nodewright.disruption.decide import (
    METHODS,
    DecisionOptions,
    PassOutcome,
    decide,
    decide_expiration,
    decide_pass,
    validate,
)
from nodewright.disruption.drift import drift_reason
from nodewright.disruption.model import (
    DELETE,
    DRIFT,
    EMPTINESS,
    EXPIRATION,
    MULTI_NODE,
    PDB,
    REPLACE,
    SINGLE_NODE,
    ClusterView,
    Decision,
    Node,
    NodeClassInfo,
    Pool,
)
from nodewright.disruption.pricing import Skip

__all__ = [
    "DELETE",
    "DRIFT",
    "EMPTINESS",
    "EXPIRATION",
    "METHODS",
    "MULTI_NODE",
    "PDB",
    "REPLACE",
    "SINGLE_NODE",
    "Skip",
    "ClusterView",
    "ConsolidationOptions",
    "Decision",
    "DecisionOptions",
    "Node",
    "NodeClassInfo",
    "PassOutcome",
    "Pool",
    "allowed_disruptions",
    "budget_active",
    "budget_mapping",
    "decide",
    "decide_expiration",
    "decide_pass",
    "drift_reason",
    "validate",
]
