"""CapacityBuffer resolution (Karpenter main ``pkg/controllers/capacitybuffer`` helpers_test / suite_test cases):
replicas, percentage and limits, the virtual pods' shape, and bad input as one message naming object and field."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import capacitybuffer as cb
from nodewright.state.buffers import (
    buffer_of,
    desired_replicas,
    is_virtual,
    limit_replicas,
    percentage_replicas,
    resolve,
)
from nodewright.state.models import ClusterModels

GI = 2**30


def template(cpu: str = "1", memory: str = "2Gi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}


def pod_template(name: str = "web", **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "7", "generation": 3},
            "template": template(**kw)}


def deployment(replicas: int | None = 10, name: str = "web") -> dict[str, Any]:
    spec: dict[str, Any] = {"template": template(), "selector": {"matchLabels": {"app": "web"}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": "9"}, "spec": spec}


_RV = iter(range(1, 10_000))


def buffer(spec: dict[str, Any], name: str = "headroom") -> dict[str, Any]:
    return {"apiVersion": cb.API_VERSION, "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": "default", "uid": "u-1", "resourceVersion": str(next(_RV))},
            "spec": spec}


def lookup(*objs: dict[str, Any]):
    index = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs}
    return lambda kind, namespace, name: index.get((kind, namespace, name))


@pytest.fixture
def models() -> ClusterModels:
    return ClusterModels()


# --- the count ---------------------------------------------------------------------------------------------------


def test_percentage_rounds_up_with_a_floor_of_one() -> None:
    assert percentage_replicas(10, 20) == 2
    assert percentage_replicas(10, 25) == 3  # ceil(2.5)
    assert percentage_replicas(3, 1) == 1  # ceil(0.03), at least one chunk
    assert percentage_replicas(0, 50) == 0
    assert percentage_replicas(10, 0) == 0


def test_limits_floor_each_overlapping_resource_and_take_the_smallest() -> None:
    requests = {"cpu": 1000, "memory": 2 * GI, "pods": 1}
    assert limit_replicas({"cpu": 7500, "memory": 100 * GI}, requests) == 7
    assert limit_replicas({"cpu": 100_000, "memory": 5 * GI}, requests) == 2
    assert limit_replicas({"nvidia.com/gpu": 4}, requests) is None  # nothing overlaps: no constraint
    assert limit_replicas({"pods": 3}, requests) is None  # the scheduler's pods: 1 is not a request


@pytest.mark.parametrize(("spec", "scalable", "want"), [
    ({"replicas": 3}, None, 3),
    ({"replicas": 3, "percentage": 50}, 10, 5),  # the larger of the two (Karpenter's code, not the API comment)
    ({"replicas": 8, "percentage": 50}, 10, 8),
    ({"percentage": 50}, 10, 5),
    ({"replicas": 10, "limits": {"cpu": "4"}}, None, 4),  # limits cap
    ({"replicas": 2, "limits": {"cpu": "4"}}, None, 2),
    ({"limits": {"cpu": "4", "memory": "6Gi"}}, None, 3),  # limits alone: as many as fit
    ({"limits": {"nvidia.com/gpu": "1"}, "replicas": 5}, None, 5),
    ({"limits": {"nvidia.com/gpu": "1"}}, None, 0),
    ({"percentage": 50}, 0, 0),
])
def test_desired_replicas(spec: dict[str, Any], scalable: int | None, want: int) -> None:
    model = cb.CapacityBufferSpec.model_validate({"scalableRef": {"kind": "Deployment", "name": "web"}, **spec})
    from nodewright.quantities import parse_resource_list
    limits = parse_resource_list(spec.get("limits"))
    assert desired_replicas(model, {"cpu": 1000, "memory": 2 * GI, "pods": 1}, limits, scalable) == want


# --- resolution --------------------------------------------------------------------------------------------------


def test_pod_template_buffer_resolves_into_virtual_pods_with_the_templates_constraints(models) -> None:
    toleration = {"key": "team", "operator": "Exists", "effect": "NoSchedule"}
    tpl = pod_template(nodeSelector={"team": "web"}, tolerations=[toleration], nodeName="pinned",
                       volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                                {"name": "tmp", "emptyDir": {}}])
    tpl["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/d"},
                                                                {"name": "tmp", "mountPath": "/t"}]
    res = resolve(buffer({"podTemplateRef": {"name": "web"}, "replicas": 3}), models, lookup(tpl))
    assert (res.ready, res.reason, res.replicas) == (True, cb.REASON_RESOLVED, 3)
    assert (res.pod_template, res.pod_template_generation) == ("web", 3)
    assert [p.key for p in res.pods] == [f"default/capacity-buffer-headroom-{i}" for i in (1, 2, 3)]
    pod = res.pods[0]
    assert pod.requests == {"cpu": 1000, "memory": 2 * GI, "pods": 1}
    assert pod.node_selector == {"team": "web"} and pod.tolerations[0].key == "team"
    assert pod.labels == {"app": "web"} and pod.priority == -(2**31) and not pod.node_name
    assert pod.uid == "u-1-1" and is_virtual(pod) and buffer_of(pod) == "default/headroom"
    assert not pod.volumes and not pod.affinity.volume_required  # the PVC is gone: no claim will ever exist


def test_scalable_ref_buffer_follows_the_workloads_replicas(models) -> None:
    spec = {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}, "percentage": 20}
    res = resolve(buffer(spec), models, lookup(deployment(10)))
    assert (res.ready, res.replicas, res.pod_template) == (True, 2, None)
    assert resolve(buffer(spec), models, lookup(deployment(None))).replicas == 1  # unset replicas count 1


def test_limits_alone_size_a_pod_template_buffer(models) -> None:
    res = resolve(buffer({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "20", "memory": "9Gi"}}), models,
                  lookup(pod_template()))
    assert res.replicas == 4  # memory: floor(9Gi / 2Gi)
    assert len(res.pods) == 4


def test_zero_chunks_is_ready_and_empty(models) -> None:
    res = resolve(buffer({"podTemplateRef": {"name": "web"}, "replicas": 0}), models, lookup(pod_template()))
    assert (res.ready, res.replicas, res.pods) == (True, 0, [])


def test_percentage_on_a_pod_template_buffer_is_ignored_with_a_sentence(models) -> None:
    res = resolve(buffer({"podTemplateRef": {"name": "web"}, "replicas": 1, "percentage": 50}), models,
                  lookup(pod_template()))
    assert res.replicas == 1
    assert res.ignored == ["CapacityBuffer default/headroom: spec.percentage is ignored: it applies to a "
                           "scalableRef only"]


@pytest.mark.parametrize(("spec", "objs", "reason", "message"), [
    ({"podTemplateRef": {"name": "web"}, "replicas": -1}, (), cb.REASON_RESOLUTION_FAILED,
     "CapacityBuffer default/headroom: spec.replicas: Input should be greater than or equal to 0, got -1"),
    ({"podTemplateRef": {"name": "web"}}, (), cb.REASON_RESOLUTION_FAILED,
     "CapacityBuffer default/headroom: spec.podTemplateRef: a podTemplateRef buffer needs replicas or limits"),
    ({"podTemplateRef": {"name": "web"}, "scalableRef": {"kind": "Deployment", "name": "web"}, "replicas": 1}, (),
     cb.REASON_RESOLUTION_FAILED,
     "CapacityBuffer default/headroom: spec.scalableRef: set either podTemplateRef or scalableRef, not both"),
    ({"replicas": 1}, (), cb.REASON_RESOLUTION_FAILED,
     "CapacityBuffer default/headroom: spec: neither podTemplateRef nor scalableRef is set"),
    ({"podTemplateRef": {"name": "web"}, "replicas": 1, "limits": {"cpu": "lots"}}, (pod_template(),),
     cb.REASON_RESOLUTION_FAILED, "CapacityBuffer default/headroom: spec.limits.cpu: 'lots' is not a quantity: "
                                  "expected a number with an optional suffix like m, Gi, G"),
    ({"podTemplateRef": {"name": "web"}, "replicas": 1}, (), cb.REASON_POD_TEMPLATE_NOT_FOUND,
     "CapacityBuffer default/headroom: spec.podTemplateRef.name: PodTemplate default/web not found"),
    ({"scalableRef": {"kind": "Deployment", "name": "api"}, "replicas": 1}, (deployment(),),
     cb.REASON_SCALABLE_REF_NOT_FOUND,
     "CapacityBuffer default/headroom: spec.scalableRef.name: Deployment default/api not found"),
    ({"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "x"}, "replicas": 1}, (),
     cb.REASON_RESOLUTION_FAILED, "CapacityBuffer default/headroom: spec.scalableRef: batch/Job is not supported; "
                                  "want apps Deployment, StatefulSet, ReplicaSet"),
    ({"podTemplateRef": {"name": "web"}, "replicas": 1, "provisioningStrategy": "buffer.x-k8s.io/ephemeral"},
     (pod_template(),), cb.REASON_RESOLUTION_FAILED,
     "CapacityBuffer default/headroom: spec.provisioningStrategy: 'buffer.x-k8s.io/ephemeral' is not supported; "
     "Karpenter acts on 'buffer.x-k8s.io/active-capacity' only"),
    ({"podTemplateRef": {"name": "web"}, "replicas": 1}, (pod_template(cpu="two"),), cb.REASON_RESOLUTION_FAILED,
     "CapacityBuffer default/headroom: PodTemplate default/web template: "
     "spec.containers[0].resources.requests.cpu: 'two' is not a quantity"),
])
def test_bad_input_is_one_message_naming_object_and_field(models, spec, objs, reason, message) -> None:
    res = resolve(buffer(spec), models, lookup(*objs))
    assert (res.ready, res.reason, res.replicas, res.pods) == (False, reason, 0, [])
    assert res.message.startswith(message) and "\n" not in res.message
