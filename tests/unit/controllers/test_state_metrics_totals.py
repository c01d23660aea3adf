"""Per-node pod/daemon requests and limits, system overhead, lifetime and cluster utilization (Karpenter's
``metrics.node`` controller families), with exact values for a two-pod node."""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.controllers.state_metrics import StateMetricsController
from nodewright.kube import resources as r
from nodewright.metrics import NODE_METRIC_LABELS


def _labels(resource: str | None = None) -> dict[str, str]:
    labels = {**dict.fromkeys(NODE_METRIC_LABELS.values(), ""), "nodepool": "general", "instance_type": "m5.large",
              "node_name": "n1", "phase": "", "managed": "true"}
    return {**labels, "resource_type": resource} if resource else labels


def _pod(name: str, requests: dict[str, str], limits: dict[str, str], daemon: bool = False) -> dict:
    meta = {"name": name, "namespace": "default"}
    if daemon:
        meta["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "apiVersion": "apps/v1", "uid": "u"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": requests,
                                                                                   "limits": limits}}]},
            "status": {"phase": "Running"}}


def test_node_totals_overhead_lifetime_and_utilization(ctx, cluster, clock) -> None:
    created = clock.now
    cluster.create(r.NODES, {"metadata": {"name": "n1", "labels": {L.NODEPOOL: "general",
                                                                    L.INSTANCE_TYPE: "m5.large"}},
                             "status": {"capacity": {"cpu": "2", "memory": "7934Mi", "pods": "29"},
                                        "allocatable": {"cpu": "1930m", "memory": "7140Mi", "pods": "29"}}})
    cluster.create(r.PODS, _pod("web", {"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}))
    cluster.create(r.PODS, _pod("aws-node", {"cpu": "25m"}, {}, daemon=True))
    clock.advance(90)
    controller = StateMetricsController(ctx)
    controller.reconcile()
    m = ctx.metrics
    assert m.value("karpenter_nodes_total_pod_requests", _labels("cpu")) == 0.5
    assert m.value("karpenter_nodes_total_pod_requests", _labels("memory")) == 2.0**30
    assert m.value("karpenter_nodes_total_pod_requests", _labels("pods")) == 1.0
    assert m.value("karpenter_nodes_total_pod_limits", _labels("cpu")) == 1.0
    assert m.value("karpenter_nodes_total_daemon_requests", _labels("cpu")) == 0.025
    assert m.value("karpenter_nodes_total_daemon_limits", _labels("cpu")) is None  # no limits set
    assert m.value("karpenter_nodes_system_overhead", _labels("cpu")) == 0.07
    assert m.value("karpenter_nodes_system_overhead", _labels("memory")) == (7934 - 7140) * 2.0**20
    assert m.value("karpenter_nodes_current_lifetime_seconds", _labels()) == clock.now - float(int(created))
    assert round(m.value("karpenter_cluster_utilization_percent", {"resource_type": "cpu"}), 6) == round(
        100 * 0.525 / 1.93, 6)
    cluster.delete(r.PODS, "web", "default")
    controller.reconcile()
    assert m.value("karpenter_nodes_total_pod_requests", _labels("cpu")) is None  # the node's last app pod left
    assert m.value("karpenter_nodes_total_daemon_requests", _labels("cpu")) == 0.025
    cluster.delete(r.NODES, "n1")
    controller.reconcile()
    assert m.value("karpenter_nodes_system_overhead", _labels("cpu")) is None
    assert m.value("karpenter_nodes_current_lifetime_seconds", _labels()) is None


def test_pod_unbound_unstarted_and_bound_times(ctx, cluster, clock) -> None:
    from nodewright.kube.objects import format_time

    controller = StateMetricsController(ctx)
    controller.reconcile()  # first pass: pods already there are not counted
    created = float(int(clock.now))
    cluster.create(r.PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}})
    clock.advance(10)
    controller.reconcile()
    m, pod = ctx.metrics, {"name": "web", "namespace": "default"}
    clock.advance(20)  # the gauges are computed when scraped
    assert m.value("karpenter_pods_unbound_time_seconds", pod) == clock.now - created
    assert m.value("karpenter_pods_unstarted_time_seconds", pod) == clock.now - created
    cluster.patch(r.PODS, "web", {"spec": {"nodeName": "n1"}}, "default")
    cluster.patch_status(r.PODS, "web", {"conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(created + 25)}]}, "default")
    controller.reconcile()
    assert m.value("karpenter_pods_unbound_time_seconds", pod) is None
    assert m.value("karpenter_pods_bound_duration_seconds_count") == 1.0
    assert m.value("karpenter_pods_bound_duration_seconds_sum") == 25.0
    assert m.value("karpenter_pods_unstarted_time_seconds", pod) == clock.now - created
    cluster.patch_status(r.PODS, "web", {"phase": "Running"}, "default")
    controller.reconcile()
    assert m.value("karpenter_pods_unstarted_time_seconds", pod) is None
