"""When a Node counts as initialized for scheduling (its taints then all count): ``node_from_manifest``."""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.scheduling.nodes import node_from_manifest


def _node(taints: list[dict], ready: bool = True, labels: dict | None = None) -> dict:
    return {"kind": "Node",
            "metadata": {"name": "n1", "labels": {L.NODEPOOL: "general", **(labels or {})}},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_ready_node_whose_boot_taints_are_still_on_is_not_initialized() -> None:
    not_ready = {"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}
    held = {"key": L.NOMINATING_TAINT_KEY, "effect": L.NOMINATING_TAINT_EFFECT}
    # The milliseconds between the kubelet's Ready and the node lifecycle controller lifting not-ready, and the
    # readiness hold: still booting, so those taints do not make its planned pods look unschedulable.
    assert not node_from_manifest(_node([not_ready])).initialized
    assert node_from_manifest(_node([not_ready])).scheduling_taints() == ()
    assert not node_from_manifest(_node([held])).initialized
    assert node_from_manifest(_node([])).initialized
    assert not node_from_manifest(_node([], ready=False)).initialized
    # The label Karpenter's lifecycle sets wins; an unmanaged node is always initialized.
    assert node_from_manifest(_node([not_ready], labels={L.INITIALIZED: "true"})).initialized
    unmanaged = _node([not_ready])
    del unmanaged["metadata"]["labels"][L.NODEPOOL]
    assert node_from_manifest(unmanaged).initialized
