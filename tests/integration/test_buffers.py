"""CapacityBuffers end to end over real HTTP (gate ``CapacityBuffer`` on): the controller watches the buffers and
what they reference, launches a NodeClaim for the headroom alone and writes the buffer's status -- the requests the
RBAC replay judges against the chart (``capacitybuffers`` list/watch, ``capacitybuffers/status`` patch,
``podtemplates`` and the ``apps`` workloads list/watch)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from nodewright.settings import FeatureGates

from .awsmoto import Account
from .emulator import EmulatorThread
from .harness import Replica, apply_pool, condition, wait_for


@pytest.fixture
def replica(kube: EmulatorThread, account: Account) -> Iterator[Replica]:
    started = Replica(kube, account, "a", feature_gates=FeatureGates(capacity_buffer=True)).start()
    yield started
    if started.thread.is_alive():
        started.stop()


def _buffer(kube: EmulatorThread) -> dict[str, Any] | None:
    return kube.emulator.peek("capacitybuffers", "headroom", "default")


def test_a_buffer_alone_launches_a_nodeclaim_and_reports_its_status(kube, account, replica, core, custom) -> None:
    apply_pool(custom)
    core.create_namespaced_pod_template("default", {
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web"},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}})
    k8s.AppsV1Api(core.api_client).create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "api"}}, "template": {
            "metadata": {"labels": {"app": "api"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}})
    custom.create_namespaced_custom_object("autoscaling.x-k8s.io", "v1beta1", "default", "capacitybuffers", {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer", "metadata": {"name": "headroom"},
        "spec": {"podTemplateRef": {"name": "web"}, "replicas": 2}})
    claim = wait_for(lambda: next(iter(kube.emulator.snapshot("nodeclaims")), None), 15, "a NodeClaim for the buffer")
    assert claim["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "pods": "2"}
    status = wait_for(lambda: (b := _buffer(kube)) and condition(b, "Provisioning") and b["status"], 10,
                      "the buffer's Provisioning condition")
    assert status["replicas"] == 2 and status["podTemplateRef"] == {"name": "web"}
    assert status["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions == {"ReadyForProvisioning": ("True", "Resolved"),
                          "Provisioning": ("False", "RequiresNewCapacity")}
    assert core.list_namespaced_pod("default").items == []  # virtual pods are never objects
