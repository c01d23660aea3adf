"""``consolidationPolicy: Balanced`` (Karpenter v1.14): a consolidation move must save enough to justify its
disruption.

Source: kubernetes-sigs/karpenter ``designs/balanced-consolidation.md`` and
``pkg/controllers/disruption/balanced.go`` (read for behaviour; this is our own code). For each NodePool with
the Balanced policy whose nodes a move disrupts:

* pool totals: ``total_cost`` = sum of the USD/hour prices of the pool's priced nodes; ``total_disruption`` = for
  each of them ``1`` (a per-node base) + the sum over its reschedulable pods of ``max(0, EvictionCost(pod))``;
* the move: ``savings`` = USD/hour of the candidates minus the replacement (split across pools in proportion to
  each pool's share of the candidates' price when the move spans pools); ``disruption`` = per candidate ``1`` +
  ``max(0, EvictionCost)`` of its pods (no ``lifetime_remaining`` factor: ordering already uses it);
* ``score = (savings / total_cost) / (disruption / total_disruption)``; approved when
  ``score >= 1 / consolidation_threshold`` and ``savings > 0``. Every Balanced pool of the move must approve.

``consolidation_threshold`` is Karpenter's default of 2 (a move passes when its share of the pool's disruption
is at most twice its share of the pool's savings); Karpenter's design proposes a NodePool field to change it,
which nodewright does not model. Emptiness is not scored (an empty node always passes: its disruption is the
base of 1 and its savings its whole price).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nodewright.disruption.candidates import eviction_cost
from nodewright.disruption.model import ClusterView, Node

BALANCED = "Balanced"
#: Karpenter's default ``consolidationThreshold`` (k): approve when ``score >= 1/k``.
DEFAULT_CONSOLIDATION_THRESHOLD = 2.0


@dataclass(frozen=True, slots=True)
class BalancedScore:
    """One pool's verdict on a move.

    Attributes:
        pool: NodePool name.
        score: savings fraction / disruption fraction (0 when nothing is saved).
        savings_fraction: the move's USD/hour savings over the pool's USD/hour total.
        disruption_fraction: the move's disruption cost over the pool's total disruption cost.
        threshold: ``1 / consolidation_threshold``.
    """

    pool: str
    score: float
    savings_fraction: float
    disruption_fraction: float
    threshold: float

    @property
    def approved(self) -> bool:
        return self.savings_fraction > 0 and self.score >= self.threshold

    def reason(self) -> str:
        """E.g. ``"Balanced score 0.42 < 0.50 in NodePool 'default' (savings 4.2%, disruption 10.0%)"``."""
        op = ">=" if self.approved else "<"
        return (f"Balanced score {self.score:.2f} {op} {self.threshold:.2f} in NodePool {self.pool!r} "
                f"(savings {self.savings_fraction:.1%}, disruption {self.disruption_fraction:.1%})")


def node_disruption(node: Node) -> float:
    """The per-node base of 1 plus ``max(0, EvictionCost)`` of each pod that must move."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in node.pods)


def pool_totals(nodes: Iterable[Node], pool: str) -> tuple[float, float]:
    """``(total_cost USD/hour, total_disruption)`` of the priced nodes of ``pool`` (unpriced nodes skew nothing)."""
    cost = disruption = 0.0
    for node in nodes:
        if node.nodepool == pool and node.price > 0:
            cost += node.price
            disruption += node_disruption(node)
    return cost, disruption


def score_move(savings: float, disruption: float, totals: tuple[float, float], pool: str,
               consolidation_threshold: float = DEFAULT_CONSOLIDATION_THRESHOLD) -> BalancedScore:
    """Score one pool's part of a move (see module docstring); ``savings`` in USD/hour."""
    threshold = 1.0 / consolidation_threshold
    total_cost, total_disruption = totals
    if total_cost <= 0 or savings <= 0:
        return BalancedScore(pool, 0.0, max(0.0, savings / total_cost) if total_cost > 0 else 0.0, 0.0, threshold)
    savings_fraction = savings / total_cost
    disruption_fraction = disruption / total_disruption if total_disruption > 0 else 0.0
    score = savings_fraction / disruption_fraction if disruption_fraction > 0 else float("inf")
    return BalancedScore(pool, score, savings_fraction, disruption_fraction, threshold)


def balanced_verdicts(view: ClusterView, candidates: Sequence[Node], replacement_price: float,
                      savings: float | None = None) -> list[BalancedScore]:
    """The verdict of every Balanced pool among ``candidates``' pools (empty when none is Balanced). ``savings``
    (USD/hour) replaces candidates minus ``replacement_price`` when given: the move's saving at effective prices
    under a PricingPolicy (:mod:`nodewright.disruption.pricing`), scored against the pools' list-price totals."""
    by_pool: dict[str, list[Node]] = {}
    for node in candidates:
        by_pool.setdefault(node.nodepool, []).append(node)
    current = sum(c.price for c in candidates)
    if savings is None:
        savings = current - replacement_price
    out = []
    for name, nodes in by_pool.items():
        pool = view.pools.get(name)
        if pool is None or pool.consolidation_policy != BALANCED:
            continue
        share = savings
        if len(by_pool) > 1 and current > 0:
            share = savings * sum(n.price for n in nodes) / current
        disruption = sum(node_disruption(n) for n in nodes)
        out.append(score_move(share, disruption, pool_totals(view.nodes, name), name))
    return out


def balanced_rejection(view: ClusterView, candidates: Sequence[Node], replacement_price: float,
                       savings: float | None = None) -> str | None:
    """Why a Balanced pool rejects the move, or None when every Balanced pool (or none is) approves it."""
    for verdict in balanced_verdicts(view, candidates, replacement_price, savings):
        if not verdict.approved:
            return verdict.reason()
    return None
