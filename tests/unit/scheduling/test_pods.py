"""Pod requests (the one home: ``scheduling.pods.effective_requests``) and workload expansion.

Effective requests follow ``k8s.io/component-helpers/resource.PodRequests`` (what the kube-scheduler and
Karpenter call): max(sum of app containers + sidecars, each init container + the sidecars started before it),
limits standing in for missing requests, pod-level ``spec.resources`` overriding cpu/memory, plus overhead.
"""

import pytest

from nodewright.errors import NodewrightValidationError
from nodewright.quantities import format_resources, parse_quantity
from nodewright.scheduling import daemonset_pod, pod_from_manifest, pods_from_workload

MIB = 2**20


def _pod(spec: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def test_quantities_parse_to_canonical_units() -> None:
    assert parse_quantity("1780m", "cpu") == 1780
    assert parse_quantity("1.5", "cpu") == 1500
    assert parse_quantity("3448Mi") == 3448 * MIB
    assert parse_quantity("256M") == 256_000_000
    assert parse_quantity("1e3") == 1000
    with pytest.raises(NodewrightValidationError):
        parse_quantity("lots")


def test_format_resources_is_karpenters_spelling() -> None:
    assert format_resources({"pods": 9, "memory": 3448 * MIB, "cpu": 1780}) == "{cpu: 1780m, memory: 3448Mi, pods: 9}"


def test_requests_containers_summed_init_max_overhead_and_pods() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1", "memory": "128Mi"}}}],
        "overhead": {"cpu": "10m"},
    }
    assert pod_from_manifest(_pod(spec)).requests == {"cpu": 1010, "memory": 512 * MIB, "pods": 1}


def test_sidecar_init_containers_add_to_the_sum() -> None:
    spec = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}],
        "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
    }
    assert pod_from_manifest(_pod(spec)).requests["cpu"] == 600


def test_limits_stand_in_for_missing_requests_extended_resources() -> None:
    spec = {"containers": [{"name": "g", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}, "requests": {"cpu": "500m"}}}]}
    assert pod_from_manifest(_pod(spec)).requests == {"nvidia.com/gpu": 2, "cpu": 500, "pods": 1}


ISSUE_13_POD = {
    "containers": [{"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}],
    "initContainers": [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "migrate", "resources": {"requests": {"cpu": "200m"}}},
    ],
}


def test_limits_only_container_sidecar_and_init_container() -> None:
    # The issue's pod: 1000m (limit as request) + 500m sidecar; the init container needs 200m + 500m < 1500m.
    assert pod_from_manifest(_pod(ISSUE_13_POD)).requests == {
        "cpu": 1500, "memory": 1024 * MIB, "nvidia.com/gpu": 1, "pods": 1}


def test_init_container_counts_only_the_sidecars_started_before_it() -> None:
    spec = {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
        "initContainers": [
            {"name": "big-init", "resources": {"requests": {"cpu": "2"}}},
            {"name": "late-sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "300m"}}},
        ],
    }
    # big-init runs before the sidecar starts: max(100m + 300m, 2000m + 0).
    assert pod_from_manifest(_pod(spec)).requests["cpu"] == 2000


def test_pod_level_resources_override_the_container_aggregate() -> None:
    spec = {**ISSUE_13_POD, "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "2Gi"}}, "overhead": {"cpu": "50m"}}
    # cpu from the pod-level request, memory from the pod-level limit (defaults the request), gpu unchanged
    # (not a pod-level resource), overhead added after.
    assert pod_from_manifest(_pod(spec)).requests == {
        "cpu": 3050, "memory": 2048 * MIB, "nvidia.com/gpu": 1, "pods": 1}


def test_every_reader_of_a_pod_object_gets_the_same_requests() -> None:
    from nodewright.kube import resources as r
    from nodewright.kube.memory import InMemoryCluster
    from nodewright.sim.baseline import _utilization
    from nodewright.state.models import models_for

    cluster = InMemoryCluster(lambda: 0.0)
    doc = cluster.create(r.PODS, {**_pod(ISSUE_13_POD), "metadata": {"name": "p", "namespace": "default"}})
    models = models_for(cluster)
    assert models.requests(doc) == pod_from_manifest(doc).requests
    assert models.pod(doc) is models.pod(doc)  # converted once per resourceVersion
    # The Cluster Autoscaler baseline's utilization reads the same 1500m / 1Gi.
    assert _utilization([doc], {"cpu": 3000, "memory": 4096 * MIB}, models) == 0.5


def test_deployment_replicas_named_from_zero_and_share_shape() -> None:
    doc = {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}}},
    }
    pods = pods_from_workload(doc)
    assert [p.key for p in pods] == ["shop/web-0", "shop/web-1", "shop/web-2"]
    assert len({p.shape_key for p in pods}) == 1 and pods[2].owner_kind == "Deployment"


def test_job_parallelism_and_cronjob_one_run() -> None:
    job = {"kind": "Job", "metadata": {"name": "j"}, "spec": {"parallelism": 3, "completions": 2, "template": {"spec": {"containers": []}}}}
    cron = {"kind": "CronJob", "metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}}
    assert [p.name for p in pods_from_workload(job)] == ["j-0", "j-1"]
    assert [p.name for p in pods_from_workload(cron)] == ["c-0"]


def test_matchlabelkeys_merge_into_spread_selector() -> None:
    spec = {
        "containers": [],
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "a"}}, "matchLabelKeys": ["rev"]}
        ],
    }
    doc = {"kind": "Pod", "metadata": {"name": "p", "labels": {"app": "a", "rev": "7"}}, "spec": spec}
    tsc = pod_from_manifest(doc).topology_spread[0]
    assert tsc.label_selector is not None and tsc.label_selector.match_labels == (("app", "a"), ("rev", "7"))


def test_invalid_spread_raises_with_path() -> None:
    spec = {"containers": [], "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "x"}]}
    with pytest.raises(NodewrightValidationError, match=r"spec.topologySpreadConstraints\[0\].maxSkew"):
        pod_from_manifest(_pod(spec))


def test_daemonset_pod_keeps_tolerations() -> None:
    doc = {"kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {"template": {"spec": {
        "tolerations": [{"operator": "Exists"}], "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}}}
    ds = daemonset_pod(doc)
    assert ds.is_daemonset and ds.requests == {"cpu": 100, "pods": 1} and ds.tolerations[0].operator == "Exists"
