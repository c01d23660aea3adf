"""A pod that two PodDisruptionBudgets select blocks its node's voluntary disruption (issue #26 item 2).

The Eviction API refuses such a pod whatever the budgets allow (Kubernetes ``eviction.go``: 500 "This pod has
more than one PodDisruptionBudget, which the eviction subresource does not support"), so a consolidation or
drift decision including its node could never finish its drain. The rule is :func:`nodewright.kube.pdb.
overlapping_budgets` (the eviction path's home); the controller reports a ``DisruptionBlocked`` Event on the Node.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics

from .test_controller import NODEPOOL, Clock, Cloud, add_node

REASON = ("pod default/n0-p0 is selected by more than one PodDisruptionBudget (default/n0-team, default/n0-web): "
          "the Eviction API refuses to evict it")


@pytest.fixture
def env() -> tuple[InMemoryCluster, DisruptionController]:
    clock, cloud = Clock(), Cloud()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
    for i in range(3):
        add_node(cluster, f"n{i}", "c.medium", [500])
    return cluster, DisruptionController(ctx, Terminator(ctx))


def _pdb(cluster: InMemoryCluster, name: str, labels: dict[str, Any]) -> None:
    cluster.create(r.PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": name, "namespace": "default"},
                            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}})


def _candidates(controller: DisruptionController) -> list[str]:
    controller.reconcile()
    assert controller.command is not None
    return [c.name for c in controller.command.decision.candidates]


def test_one_budget_that_allows_a_disruption_does_not_block(env: Any) -> None:
    cluster, controller = env
    _pdb(cluster, "n0-web", {"app": "n0"})
    assert "n0" in _candidates(controller)
    assert [e for e in cluster.events if e["reason"] == "DisruptionBlocked"] == []


def test_a_pod_two_budgets_select_keeps_its_node(env: Any) -> None:
    cluster, controller = env
    _pdb(cluster, "n0-web", {"app": "n0"})
    _pdb(cluster, "n0-team", {"app": "n0"})  # both allow one disruption; together they forbid every eviction
    assert _candidates(controller) == ["n1", "n2"]  # their pods move to n0, which stays
    blocked = [(e["name"], e["message"]) for e in cluster.events if e["reason"] == "DisruptionBlocked"]
    assert blocked == [("n0", REASON)]
