"""Nodes running a pod with Dynamic Resource Allocation requirements are not disrupted (issue 14): Karpenter v1.14
(``IGNORE_DRA_REQUESTS=true``) cannot schedule such a pod again, so the ``SimulateScheduling`` of a move fails with
the scheduler's DRA error; consolidation publishes it as ``Unconsolidatable`` and drift as a blocked disruption.
nodewright fails the simulation the same way and reports a ``DisruptionBlocked`` Event on the Node, once."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.disruption import decide
from nodewright.disruption.decide import decide_pass
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics
from nodewright.state.blocked import DRA_REASON
from nodewright.state.cluster import snapshot
from nodewright.state.disruption_view import view_from_state

from .helpers import CATALOG, NOW
from .test_controller import NODEPOOL, Clock, Cloud, add_node


@pytest.fixture
def env() -> tuple[InMemoryCluster, Clock, Cloud, DisruptionController]:
    clock, cloud = Clock(), Cloud()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
    return cluster, clock, cloud, DisruptionController(ctx, Terminator(ctx))


def _use_dra(cluster: Any, pod: str) -> None:
    doc = cluster.get(r.PODS, pod, "default")
    spec = {**doc["spec"], "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
    cluster.delete(r.PODS, pod, "default")
    cluster.create(r.PODS, {**doc, "spec": spec, "metadata": {k: v for k, v in doc["metadata"].items()
                                                              if k in ("name", "namespace", "labels")}})


def _view(cluster: Any) -> Any:
    state = snapshot(cluster)
    return view_from_state(state, NOW, {"default": list(CATALOG)})


def test_a_node_with_a_dra_pod_is_left_out_of_consolidation(env: Any) -> None:
    cluster, _, _, controller = env
    for i in range(3):
        add_node(cluster, f"n{i}", "c.medium", [500])
    _use_dra(cluster, "n1-p0")
    view = _view(cluster)
    (trainer,) = [n for n in view.nodes if n.unmovable]
    assert trainer.name == "n1" and trainer.unmovable == {"default/n1-p0": DRA_REASON}
    outcome = decide_pass(view, NOW)
    # Multi-node consolidation: the prefix of all three fails on n1's pod; the largest prefix left, n0, is
    # deleted (its 500m fit on n1 or n2), as Karpenter's binary search over prefixes does.
    assert outcome.decision is not None
    assert [c.name for c in outcome.decision.candidates] == ["n0"] and not outcome.decision.replacements
    assert outcome.blocked == {"n1": f"pod default/n1-p0 cannot be rescheduled: {DRA_REASON}"}
    # The controller: the same decision, and a DisruptionBlocked Event on n1 with the reason.
    controller.reconcile()
    assert controller.command is not None
    assert [c.name for c in controller.command.decision.candidates] == ["n0"]
    blocked = [(e["name"], e["message"]) for e in cluster.events if e["reason"] == "DisruptionBlocked"]
    assert blocked == [("n1", f"pod default/n1-p0 cannot be rescheduled: {DRA_REASON}")]


def test_a_drifted_node_with_a_dra_pod_is_not_replaced(env: Any) -> None:
    cluster = env[0]
    add_node(cluster, "n0", "c.medium", [3900])
    _use_dra(cluster, "n0-p0")
    view = _view(cluster)
    (node,) = view.nodes
    node.cloud_drift = "AMIDrift"
    outcome = decide_pass(view, NOW)
    assert outcome.decision is None
    assert outcome.blocked == {"n0": f"pod default/n0-p0 cannot be rescheduled: {DRA_REASON}"}
    # Without the claim the same drifted node is replaced.
    node.unmovable = {}
    decision = decide(view, NOW)
    assert decision is not None and decision.method == "drift" and [c.name for c in decision.candidates] == ["n0"]
