"""Budgets: percent rounding, counts, cron schedules in UTC on a fixed clock, reasons, most restrictive wins."""

from __future__ import annotations

import datetime as dt

import pytest

from nodewright.api.nodepool import Budget
from nodewright.disruption.budgets import (
    UNLIMITED,
    allowed_disruptions,
    budget_active,
    budget_mapping,
    within_budget,
)

from .helpers import NOW, cluster, node, pool


def at(hour: int, minute: int = 0, day: int = 20) -> float:
    return dt.datetime(2026, 7, day, hour, minute, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(("nodes", "total", "expected"), [
    ("10%", 11, 2), ("10%", 10, 1), ("10%", 1, 1), ("10%", 0, 0), ("50%", 3, 2), ("0%", 9, 0), ("100%", 7, 7),
    ("3", 100, 3), ("0", 5, 0),
])
def test_nodes_count_and_percent_rounds_up(nodes: str, total: int, expected: int) -> None:
    assert allowed_disruptions([Budget(nodes=nodes)], "Underutilized", total, 0, NOW) == expected


def test_deleting_and_not_ready_nodes_are_subtracted_never_below_zero() -> None:
    assert allowed_disruptions([Budget(nodes="5")], "Empty", 20, 2, NOW) == 3
    assert allowed_disruptions([Budget(nodes="20%")], "Empty", 20, 4, NOW) == 0
    assert allowed_disruptions([Budget(nodes="1")], "Empty", 20, 3, NOW) == 0


def test_most_restrictive_active_budget_wins() -> None:
    budgets = [Budget(nodes="50%"), Budget(nodes="3"), Budget(nodes="20%")]
    assert allowed_disruptions(budgets, "Drifted", 10, 0, NOW) == 2


def test_reasons_restrict_a_budget_to_those_reasons() -> None:
    budgets = [Budget(nodes="0", reasons=["Drifted"]), Budget(nodes="4")]
    assert allowed_disruptions(budgets, "Drifted", 10, 0, NOW) == 0
    assert allowed_disruptions(budgets, "Underutilized", 10, 0, NOW) == 4
    assert allowed_disruptions([Budget(nodes="2", reasons=["Empty"])], "Underutilized", 10, 0, NOW) == UNLIMITED


def test_schedule_window_in_utc_with_duration() -> None:
    # Business hours freeze: from 09:00 UTC for 8h, no disruption.
    freeze = Budget(nodes="0", schedule="0 9 * * *", duration="8h")
    assert budget_active(freeze, at(9, 0))
    assert budget_active(freeze, at(16, 59))
    assert not budget_active(freeze, at(17, 0))
    assert not budget_active(freeze, at(8, 59))
    budgets = [freeze, Budget(nodes="10%")]
    assert allowed_disruptions(budgets, "Underutilized", 30, 0, at(12)) == 0
    assert allowed_disruptions(budgets, "Underutilized", 30, 0, at(20)) == 3


def test_schedule_macro_and_minutes_duration() -> None:
    midnight = Budget(nodes="1", schedule="@daily", duration="1h30m")
    assert budget_active(midnight, at(1, 29))
    assert not budget_active(midnight, at(1, 30))
    # Window crossing midnight: Sunday 22:00 for 4h covers Monday 01:00 (2026-07-20 is a Monday).
    weekend = Budget(nodes="0", schedule="0 22 * * 0", duration="4h")
    assert budget_active(weekend, at(1, 0))
    assert not budget_active(weekend, at(1, 0, day=21))


def test_budget_mapping_counts_initialized_nodes_per_pool() -> None:
    nodes = [node(f"n{i}") for i in range(10)] + [node("booting", initialized=False), node("gone", deleting=True)]
    view = cluster(nodes, [pool(budgets=[Budget(nodes="30%")])])
    # 11 initialized (booting excluded): ceil(3.3) = 4, minus 1 deleting = 3.
    assert budget_mapping(view.pools, view.nodes, "Underutilized", NOW) == {"default": 3}
    assert [n.name for n in within_budget(nodes, {"default": 3})] == ["n0", "n1", "n2"]
