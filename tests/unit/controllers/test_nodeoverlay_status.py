"""The NodeOverlay status controller: ValidationSucceeded/Ready as Karpenter's nodeoverlay.controller sets them
(applied, Conflict naming the other overlay, RuntimeValidation naming the field), patched only on change, and
nothing written while the gate is off."""

from __future__ import annotations

from typing import Any

from nodewright.cloud.overlay import OverlayStore
from nodewright.controllers.common import Context
from nodewright.controllers.nodeoverlay import NodeOverlayStatusController
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics
from nodewright.state.cluster import snapshot
from tests.unit.disruption.test_controller import NODEPOOL, Clock
from tests.unit.disruption.test_controller_pricing import RealCloud


def _overlay(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [], **spec}}


def _conditions(cluster: InMemoryCluster, name: str) -> dict[str, tuple[str, str, str]]:
    obj = cluster.get(r.NODEOVERLAYS, name)
    assert obj is not None
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in (obj.get("status") or {}).get("conditions", [])}


def _env(gate: bool = True) -> tuple[InMemoryCluster, NodeOverlayStatusController]:
    clock = Clock()
    cluster = InMemoryCluster(clock, seed=1)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, RealCloud(), clock, Metrics(), "demo", overlays=OverlayStore(gate))  # type: ignore[arg-type]
    return cluster, NodeOverlayStatusController(ctx)


def test_conditions_for_applied_conflicting_and_invalid_overlays() -> None:
    cluster, controller = _env()
    cluster.create(r.NODEOVERLAYS, _overlay("overlay-a", {"weight": 10, "price": "1.03"}))
    cluster.create(r.NODEOVERLAYS, _overlay("overlay-b", {"weight": 10, "priceAdjustment": "+10%"}))
    cluster.create(r.NODEOVERLAYS, _overlay("overlay-c", {"weight": 20, "capacity": {"cpu": "1"}}))
    controller.reconcile(snapshot(cluster))
    assert _conditions(cluster, "overlay-b") == {"ValidationSucceeded": ("True", "ValidationSucceeded", ""),
                                                 "Ready": ("True", "Ready", "")}
    a = _conditions(cluster, "overlay-a")
    assert a["Ready"] == ("False", "UnhealthyDependents", "ValidationSucceeded=False")
    status, reason, message = a["ValidationSucceeded"]
    assert (status, reason) == ("False", "Conflict")
    assert message.startswith("conflict with another overlay: NodeOverlay 'overlay-b' of weight 10 already sets "
                              "the price of the on-demand offering in ")
    assert "NodePool default" in message
    c = _conditions(cluster, "overlay-c")["ValidationSucceeded"]
    assert c[:2] == ("False", "RuntimeValidation") and c[2].startswith("spec.capacity[cpu]: 'cpu' is restricted")


def test_status_is_patched_only_on_change_and_follows_fixes() -> None:
    cluster, controller = _env()
    cluster.create(r.NODEOVERLAYS, _overlay("a", {"weight": 1, "price": "1"}))
    cluster.create(r.NODEOVERLAYS, _overlay("b", {"weight": 1, "price": "2"}))
    controller.reconcile(snapshot(cluster))
    version = cluster.get(r.NODEOVERLAYS, "a")["metadata"]["resourceVersion"]  # type: ignore[index]
    controller.reconcile(snapshot(cluster))
    assert cluster.get(r.NODEOVERLAYS, "a")["metadata"]["resourceVersion"] == version  # type: ignore[index]
    assert _conditions(cluster, "a")["ValidationSucceeded"][1] == "Conflict"
    cluster.patch(r.NODEOVERLAYS, "a", {"spec": {"weight": 2}})  # a higher weight resolves the conflict
    controller.reconcile(snapshot(cluster))
    assert _conditions(cluster, "a")["Ready"] == ("True", "Ready", "")
    assert _conditions(cluster, "b")["Ready"] == ("True", "Ready", "")


def test_gate_off_writes_nothing() -> None:
    cluster, controller = _env(gate=False)
    cluster.create(r.NODEOVERLAYS, _overlay("a", {"price": "1"}))
    controller.reconcile(snapshot(cluster))
    assert _conditions(cluster, "a") == {}
