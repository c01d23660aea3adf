"""Pods that block their node's voluntary disruption, through the disruption controller (issue #26 items 2, 4).

A pod that two PodDisruptionBudgets select (item 2):

The Eviction API refuses such a pod whatever the budgets allow (Kubernetes ``eviction.go``: 500 "This pod has
more than one PodDisruptionBudget, which the eviction subresource does not support"), so a consolidation or
drift decision including its node could never finish its drain. The rule is :func:`nodewright.kube.pdb.
overlapping_budgets` (the eviction path's home); the controller reports a ``DisruptionBlocked`` Event on the Node.

``karpenter.sh/do-not-evict`` on a live pod (item 4): Karpenter v1 ignores the v1alpha5 annotation; nodewright keeps
honouring it like ``karpenter.sh/do-not-disrupt`` (the safer reading, documented in docs/karpenter-compatibility.md)
and logs one warning line per pod, the first pass it sees it.
"""

from __future__ import annotations

import logging
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


WARNING = ('pod default/n0-p0 has karpenter.sh/do-not-evict: Karpenter v1 ignores it; nodewright honours it as '
           'karpenter.sh/do-not-disrupt (its node is not disrupted voluntarily); annotate the pod '
           'karpenter.sh/do-not-disrupt: "true" instead')


def _env(n0_annotations: dict[str, str] | None = None) -> tuple[InMemoryCluster, DisruptionController]:
    """Three c.medium nodes n0..n2 with one 500m pod each (labels app=<node>); n0's pod annotated as given."""
    clock, cloud = Clock(), Cloud()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
    for i in range(3):
        add_node(cluster, f"n{i}", "c.medium", [500], pod_annotations=n0_annotations if i == 0 else None)
    return cluster, DisruptionController(ctx, Terminator(ctx))


@pytest.fixture
def env() -> tuple[InMemoryCluster, DisruptionController]:
    return _env()


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


def test_do_not_evict_is_honoured_and_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    _, controller = _env({"karpenter.sh/do-not-evict": "true"})
    with caplog.at_level(logging.WARNING, logger="nodewright"):
        controller.reconcile()
        controller.reconcile()
    assert [r.getMessage() for r in caplog.records if "do-not-evict" in r.getMessage()] == [WARNING]
    assert _candidates(controller) == ["n1", "n2"]  # n0 stays
