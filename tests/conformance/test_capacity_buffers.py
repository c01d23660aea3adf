"""Karpenter main ``pkg/controllers/capacitybuffer/suite_test.go`` (Describe "CapacityBuffer": "PodTemplateRef
resolution", "ScalableRef resolution", "Replica calculation") and ``pkg/controllers/provisioning/buffers_test.go``
("computeProvisioningCondition"), ported to one provisioning decision (``simulate -f``): a CapacityBuffer in the
input is resolved and its virtual pods are planned with the pending pods.

Where Karpenter reads ``status.replicas``, the port counts the buffer's virtual pods in the decision
(``capacity-buffer-<name>-<i>``); where it reads the Provisioning condition, the port reads where they went
(existing nodes: FitsExistingCapacity; new NodeClaims: RequiresNewCapacity).
"""

from __future__ import annotations

from typing import Any

import pytest

from .kit import Decision, node, nodepool, pod, pod_spec, run

GROUP = "autoscaling.x-k8s.io/v1beta1"


def cpu_template(name: str = "web", cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": "default"},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(cpu=cpu)}}


def deployment(name: str, replicas: int | None, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}},
                            "template": {"metadata": {"labels": {"app": name}},
                                         "spec": pod_spec(cpu=cpu)}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def capacity_buffer(name: str = "buf", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "CapacityBuffer", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def virtual(decision: Decision, name: str = "buf") -> list[str]:
    prefix = f"default/capacity-buffer-{name}-"
    placed = [k for nc in decision.claims for k in nc["pods"] if k.startswith(prefix)]
    placed += [k for e in decision.raw["existing"] for k in e["pods"] if k.startswith(prefix)]
    return sorted(placed, key=lambda k: int(k.rsplit("-", 1)[1]))


# Context "PodTemplateRef resolution" / It "should resolve a PodTemplate and set ReadyForProvisioning=True"
def test_pod_template_buffer_is_provisioned() -> None:
    d = run(nodepool(), cpu_template(), capacity_buffer(podTemplateRef={"name": "web"}, replicas=3))
    assert virtual(d) == [f"default/capacity-buffer-buf-{i}" for i in (1, 2, 3)]
    assert all(d.where(k)[0] == "new" for k in virtual(d))


# It "should set ReadyForProvisioning=False when PodTemplate is not found"
def test_missing_pod_template_provisions_nothing() -> None:
    d = run(nodepool(), capacity_buffer(podTemplateRef={"name": "missing"}, replicas=3))
    assert virtual(d) == [] and d.claims == []


# Context "ScalableRef resolution": a Deployment with percentage, a StatefulSet, nil replicas, unsupported kind
@pytest.mark.parametrize(("workload", "spec", "want"), [
    (deployment("d", 10), {"percentage": 20}, 2),
    ({**deployment("s", 4), "kind": "StatefulSet"}, {"replicas": 2}, 2),
    (deployment("d", None), {"percentage": 50}, 1),  # nil spec.replicas counts 1; ceil(0.5) = 1
])
def test_scalable_ref_buffer(workload: dict[str, Any], spec: dict[str, Any], want: int) -> None:
    ref = {"apiGroup": "apps", "kind": workload["kind"], "name": workload["metadata"]["name"]}
    d = run(nodepool(), workload, capacity_buffer(scalableRef=ref, **spec))
    assert len(virtual(d)) == want


# It "should return error for unsupported kind" / "unsupported API group"
@pytest.mark.parametrize("ref", [{"apiGroup": "apps", "kind": "DaemonSet", "name": "d"},
                                 {"apiGroup": "batch", "kind": "Deployment", "name": "d"}])
def test_unsupported_scalable_ref_provisions_nothing(ref: dict[str, str]) -> None:
    d = run(nodepool(), deployment("d", 10), capacity_buffer(scalableRef=ref, replicas=2))
    assert virtual(d) == []


# Context "Replica calculation" / DescribeTable "should resolve buffer replicas from replicas, percentage, and limits"
@pytest.mark.parametrize(("spec", "scalable", "want"), [
    ({"replicas": 7}, None, 7),  # fixed replicas only
    ({"replicas": 10, "limits": {"cpu": "3"}}, None, 3),  # replicas capped by binding limit
    ({"replicas": 3, "limits": {"cpu": "10"}}, None, 3),  # non-binding limit
    ({"limits": {"cpu": "5"}}, None, 5),  # limits only
    ({"percentage": 20}, 10, 2),  # percentage only
    ({"replicas": 5, "percentage": 20}, 10, 5),  # replicas > percentage: max(5, 2)
    ({"replicas": 5, "percentage": 80}, 10, 8),  # percentage > replicas: max(5, 8)
    ({"replicas": 5, "percentage": 80, "limits": {"cpu": "4"}}, 10, 4),  # max(5, 8) capped by the limit
    ({"percentage": 10}, 1, 1),  # rounds up to at least one
])
def test_replica_calculation(spec: dict[str, Any], scalable: int | None, want: int) -> None:
    if scalable is None:
        docs = [cpu_template(), capacity_buffer(podTemplateRef={"name": "web"}, **spec)]
    else:
        docs = [deployment("d", scalable),
                capacity_buffer(scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "d"}, **spec)]
    assert len(virtual(run(nodepool(), *docs))) == want


# buffers_test.go Describe "computeProvisioningCondition": True/FitsExistingCapacity when all pods fit,
# False/RequiresNewCapacity when new nodes are needed
def test_virtual_pods_fit_existing_room_before_new_capacity() -> None:
    d = run(nodepool(), node("n1", instance_type="m5.2xlarge"), cpu_template(),
            capacity_buffer(podTemplateRef={"name": "web"}, replicas=2))
    assert [d.where(k) for k in virtual(d)] == [("existing", "n1"), ("existing", "n1")] and d.claims == []
    d = run(nodepool(), node("n1", instance_type="m5.large"), cpu_template(),
            capacity_buffer(podTemplateRef={"name": "web"}, replicas=4))
    assert [d.where(k)[0] for k in virtual(d)].count("new") >= 2


# The RFC's single loop: real pods and virtual pods are scheduled together, in one decision.
def test_real_pending_pods_and_the_buffer_share_one_decision() -> None:
    d = run(nodepool(), pod("real", cpu="1"), cpu_template(),
            capacity_buffer(podTemplateRef={"name": "web"}, replicas=1))
    assert d.scheduled("real") and virtual(d) == ["default/capacity-buffer-buf-1"]
