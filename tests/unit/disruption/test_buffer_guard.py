"""The CapacityBuffer consolidation guard (Karpenter main: emptiness ``HasBufferPods``, virtual pods in
``SimulateScheduling``): the virtual pods a node holds join its pods in the disruption view."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import is_deleting
from nodewright.metrics import Metrics
from nodewright.state.buffers import virtual_pod_docs
from nodewright.state.models import models_for

from .test_controller import NODEPOOL, Clock, Cloud, add_node

# --- the consolidation guard ------------------------------------------------------------------------------------



@pytest.fixture
def disruption_env() -> tuple[InMemoryCluster, Clock, dict[str, list[Any]], DisruptionController]:
    clock, cloud = Clock(), Cloud()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
    held: dict[str, list[Any]] = {}
    return cluster, clock, held, DisruptionController(ctx, Terminator(ctx), buffers=lambda: held)


def virtual(cluster: InMemoryCluster, count: int, cpu: str) -> list[Any]:
    tpl = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    buffer = {"metadata": {"name": "headroom", "namespace": "default", "uid": "u", "resourceVersion": "1"}}
    return [models_for(cluster).pod(doc, pending=True) for doc in virtual_pod_docs(buffer, tpl, count, "1.1")]


def test_an_empty_node_holding_buffer_pods_is_not_consolidated(disruption_env) -> None:
    cluster, clock, held, controller = disruption_env
    add_node(cluster, "n0", "c.medium", [])
    held["n0"] = virtual(cluster, 2, "1500m")  # 3 cpu held: no cheaper node takes it
    for _ in range(3):
        assert controller.reconcile() is None
        clock.now += 20
    assert controller.command is None and not is_deleting(cluster.get(r.NODECLAIMS, "n0-claim"))
    held.clear()  # the buffer went away: the node is empty again
    clock.now += 20
    controller.reconcile()
    assert controller.command is not None and controller.command.decision.reason == "Empty"


def test_buffered_room_on_other_nodes_is_not_offered_to_a_candidates_pods(disruption_env) -> None:
    cluster, clock, held, controller = disruption_env
    add_node(cluster, "n0", "c.medium", [1000])
    add_node(cluster, "n1", "c.medium", [1000])
    controller.reconcile()  # without a buffer, one of the two half-empty nodes goes
    assert controller.command is not None and controller.command.decision.method != "emptiness"
    cluster2, clock2, held2, guarded = disruption_env_copy(cluster)
    held2["n0"] = virtual(cluster2, 2, "1200m")
    held2["n1"] = virtual(cluster2, 2, "1200m")
    guarded.reconcile()
    assert guarded.command is None  # the buffers fill the room a move would need


def disruption_env_copy(source: InMemoryCluster) -> tuple[InMemoryCluster, Clock, dict[str, list[Any]],
                                                          DisruptionController]:
    clock, cloud = Clock(), Cloud()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    add_node(cluster, "n0", "c.medium", [1000])
    add_node(cluster, "n1", "c.medium", [1000])
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")  # type: ignore[arg-type]
    held: dict[str, list[Any]] = {}
    return cluster, clock, held, DisruptionController(ctx, Terminator(ctx), buffers=lambda: held)


def test_budgets_never_count_virtual_pods(disruption_env) -> None:
    cluster, clock, held, controller = disruption_env
    add_node(cluster, "n0", "c.medium", [])
    add_node(cluster, "n1", "c.large", [500])
    cluster.create(r.PDBS, {"metadata": {"name": "web", "namespace": "default"},
                            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
                            "status": {"disruptionsAllowed": 0}})
    held["n0"] = virtual(cluster, 1, "500m")  # labelled app=web like the template: the PDB must not block it
    controller.reconcile()
    assert controller.command is not None
    assert "n0" in [c.name for c in controller.command.decision.candidates]
