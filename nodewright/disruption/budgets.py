"""Disruption budgets: how many of a NodePool's nodes a method may disrupt right now.

Karpenter v1 semantics (``NodePool.GetAllowedDisruptionsByReason`` and ``BuildDisruptionBudgetMapping``):

* a budget's ``nodes`` is a count (``"5"``) or a percentage of the pool's nodes **rounded up**
  (``"10%"`` of 11 nodes is 2);
* a budget with ``schedule`` (5-field cron or ``@daily``-style macro, evaluated in **UTC**) and ``duration`` is
  active when the schedule fired within the last ``duration`` (a fire time ``t`` with ``now - duration < t <=
  now``); a budget without a schedule is always active;
* a budget with ``reasons`` applies only to those reasons (``Empty``, ``Drifted``, ``Underutilized``); without
  reasons it applies to all;
* the most restrictive active budget wins; when no budget is active the pool is unconstrained;
* the pool's nodes are its managed, initialized nodes; nodes already being deleted or not Ready are subtracted
  from what is allowed (they are disruptions in progress), never going below zero.

Expiration (and interruption) are forceful and never budgeted.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence

from croniter import croniter

from nodewright.api.durations import to_seconds
from nodewright.api.nodepool import Budget
from nodewright.disruption.model import Node, Pool

#: Returned when no active budget constrains the pool.
UNLIMITED = 1 << 30


def budget_active(budget: Budget, now: float) -> bool:
    """Whether ``budget`` is in force at ``now`` (epoch seconds, UTC).

    Raises:
        ValueError: an invalid cron expression or duration (the API model validates both, so only for
            hand-built budgets).
    """
    if budget.schedule is None or budget.duration is None:
        return True
    window = to_seconds(budget.duration) or 0
    start = dt.datetime.fromtimestamp(now - window, tz=dt.UTC)
    # First fire strictly after the window's start; active when it is not after now.
    fire = croniter(budget.schedule, start).get_next(dt.datetime)
    return bool(fire.timestamp() <= now)


def budget_nodes(budget: Budget, total: int) -> int:
    """``nodes`` as a count for a pool of ``total`` nodes (percentages rounded up)."""
    percent = budget.percent()
    if percent is None:
        return int(budget.nodes)
    return math.ceil(percent * total / 100)


def applies(budget: Budget, reason: str) -> bool:
    """Whether ``budget`` constrains disruptions for ``reason``."""
    return budget.reasons is None or reason in budget.reasons


def allowed_disruptions(budgets: Sequence[Budget], reason: str, total: int, disrupting: int, now: float) -> int:
    """Nodes that may still be disrupted for ``reason`` (never negative; :data:`UNLIMITED` if no budget binds).

    Args:
        budgets: the pool's ``spec.disruption.budgets``.
        reason: ``Empty``, ``Drifted`` or ``Underutilized``.
        total: the pool's managed, initialized nodes.
        disrupting: how many of them are being deleted or not Ready.
        now: epoch seconds.
    """
    limits = [budget_nodes(b, total) for b in budgets if applies(b, reason) and budget_active(b, now)]
    if not limits:
        return UNLIMITED
    return max(0, min(limits) - disrupting)


def pool_counts(nodes: Iterable[Node]) -> dict[str, tuple[int, int]]:
    """NodePool -> (nodes counted, nodes disrupting): initialized nodes; deleting or not Ready ones disrupting."""
    counts: dict[str, list[int]] = {}
    for node in nodes:
        if not node.initialized:
            continue
        entry = counts.setdefault(node.nodepool, [0, 0])
        entry[0] += 1
        if node.deleting or not node.ready:
            entry[1] += 1
    return {k: (v[0], v[1]) for k, v in counts.items()}


def budget_mapping(pools: dict[str, Pool], nodes: Iterable[Node], reason: str, now: float) -> dict[str, int]:
    """NodePool -> disruptions still allowed for ``reason`` at ``now`` (Karpenter's budget mapping)."""
    counts = pool_counts(nodes)
    return {
        name: allowed_disruptions(pool.budgets, reason, *counts.get(name, (0, 0)), now)
        for name, pool in pools.items()
    }


def within_budget(candidates: Iterable[Node], allowed: dict[str, int]) -> list[Node]:
    """The candidates, in order, that fit their pool's remaining budget (each taken one decrements it)."""
    remaining = dict(allowed)
    out = []
    for node in candidates:
        if remaining.get(node.nodepool, 0) > 0:
            remaining[node.nodepool] -= 1
            out.append(node)
    return out
