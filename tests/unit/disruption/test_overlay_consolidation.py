"""Consolidation under NodeOverlays: the overlaid price of the candidate (the disruption view's node price) and of
the replacements decides (Karpenter: "price adjustments affect consolidation decisions"). Real us-east-1 prices:
c5.large $0.085/h, c5.xlarge $0.17/h, m6i.large $0.096/h; one c5.xlarge node running a 1500m pod."""

from __future__ import annotations

from typing import Any

from nodewright.cloud.overlay import OverlayStore
from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics

from .test_controller import NODEPOOL, Clock, add_node
from .test_controller_pricing import OFFERED, RealCloud


def _overlay(name: str, instance_type: str, price: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                       "values": [instance_type]}], "price": price}}


def _decide(*overlays: dict[str, Any], gate: bool = True) -> str | None:
    clock = Clock()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    for overlay in overlays:
        cluster.create(r.NODEOVERLAYS, overlay)
    ctx = Context(cluster, RealCloud(), clock, Metrics(), "demo", overlays=OverlayStore(gate))  # type: ignore[arg-type]
    controller = DisruptionController(ctx, Terminator(ctx))
    add_node(cluster, "a", "c5.xlarge", [1500], types=OFFERED)
    controller.reconcile()
    return None if controller.command is None else controller.command.decision.message()


def test_overlay_price_changes_the_replacement() -> None:
    assert _decide() == "Consolidating 1 node into 1 c5.large, saving $0.09/h"
    # c5.large overlaid to $1/h: the next cheapest fit, m6i.large, replaces the node.
    assert _decide(_overlay("c5-large", "c5.large", "1")) == "Consolidating 1 node into 1 m6i.large, saving $0.07/h"


def test_overlay_price_of_the_candidate_keeps_it() -> None:
    # The running c5.xlarge overlaid to $0.05/h: no replacement is cheaper, nothing is disrupted.
    assert _decide(_overlay("c5-xlarge", "c5.xlarge", "0.05")) is None
    assert _decide(_overlay("c5-xlarge", "c5.xlarge", "0.05"), gate=False) == \
        "Consolidating 1 node into 1 c5.large, saving $0.09/h"
