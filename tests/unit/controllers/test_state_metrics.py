"""The metrics the capacity dashboard reads: NodeClaim condition transitions (lifecycle), node allocatable
gauges and pod startup latency (cluster state, once per pass), asserted sample by sample."""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.provider import LaunchError
from nodewright.controllers.condition_metrics import observe_condition_transitions
from nodewright.controllers.lifecycle import LifecycleController
from nodewright.controllers.manager import ControllerManager
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.controllers.state_metrics import StateMetricsController
from nodewright.kube import resources as r
from nodewright.kube.objects import format_time, name_of
from nodewright.metrics import NODE_METRIC_LABELS, Metrics
from nodewright.state.cluster import snapshot

from .conftest import node_for, pending_pod
from .fakes import first_fit_solver

TRANSITION = "operator_nodeclaim_status_condition_transition_seconds"
STARTUP = "karpenter_pods_startup_duration_seconds"
ALLOCATABLE = "karpenter_nodes_allocatable"


def transition(metrics: Metrics, suffix: str, type_: str, status: str, to_status: str, **extra: str) -> float | None:
    labels = {"type": type_, "status": status, "to_status": to_status, **extra}
    return metrics.value(f"{TRANSITION}_{suffix}", labels)


def provisioned_claim(ctx, cluster, clock) -> dict[str, Any]:
    """One NodeClaim created by the provisioner (at clock start + 1 s), not launched yet."""
    cluster.create(r.PODS, pending_pod("web-0"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    return cluster.list(r.NODECLAIMS)[0]


# --- operator_nodeclaim_status_condition_transition_seconds ------------------------------------------------


def test_lifecycle_observes_each_condition_leaving_unknown(ctx, cluster, clock) -> None:
    claim = provisioned_claim(ctx, cluster, clock)
    life = LifecycleController(ctx)
    clock.advance(4)
    life.reconcile()  # launched 4 s after creation
    assert transition(ctx.metrics, "count", "Launched", "Unknown", "True") == 1.0
    assert transition(ctx.metrics, "sum", "Launched", "Unknown", "True") == 4.0
    assert transition(ctx.metrics, "count", "Ready", "Unknown", "True") is None

    clock.advance(38)
    cluster.create(r.NODES, node_for(cluster.get(r.NODECLAIMS, name_of(claim))))
    life.reconcile()  # registered and initialized in the same pass, 42 s after creation
    for type_ in ("Registered", "Initialized", "Ready"):
        assert transition(ctx.metrics, "count", type_, "Unknown", "True") == 1.0, type_
        assert transition(ctx.metrics, "sum", type_, "Unknown", "True") == 42.0, type_
    assert transition(ctx.metrics, "bucket", "Ready", "Unknown", "True", le="30.0") == 0.0
    assert transition(ctx.metrics, "bucket", "Ready", "Unknown", "True", le="45.0") == 1.0
    # Nothing transitions on later passes, and Launched was observed once.
    clock.advance(60)
    life.reconcile()
    assert transition(ctx.metrics, "count", "Ready", "Unknown", "True") == 1.0
    assert transition(ctx.metrics, "count", "Launched", "Unknown", "True") == 1.0


def test_failed_launch_then_success_observes_unknown_false_then_false_true(ctx, cluster, clock, cloud) -> None:
    provisioned_claim(ctx, cluster, clock)
    cloud.create_errors.append(LaunchError("InvalidParameter"))
    life = LifecycleController(ctx)
    clock.advance(3)
    life.reconcile()  # Launched=False 3 s after creation
    assert transition(ctx.metrics, "sum", "Launched", "Unknown", "False") == 3.0
    clock.advance(10)  # past the 2 s backoff
    life.reconcile()
    assert transition(ctx.metrics, "count", "Launched", "False", "True") == 1.0
    assert transition(ctx.metrics, "sum", "Launched", "False", "True") == 10.0
    assert transition(ctx.metrics, "count", "Launched", "Unknown", "True") is None


def test_observe_skips_unchanged_and_unseen_non_lifecycle_conditions() -> None:
    metrics = Metrics()
    claim = {"metadata": {"creationTimestamp": format_time(1000)},
             "status": {"conditions": [{"type": "Launched", "status": "True", "lastTransitionTime": format_time(1010)}]}}
    new = [{"type": "Launched", "status": "True", "lastTransitionTime": format_time(1010)},
           {"type": L.CONDITION_DISRUPTION_REASON, "status": "True", "lastTransitionTime": format_time(1500)}]
    assert observe_condition_transitions(metrics, claim, new) == 0
    assert metrics.value(f"{TRANSITION}_count", {"type": "DisruptionReason", "status": "Unknown",
                                                 "to_status": "True"}) is None
    # A condition seen before is observed whatever its type: Drifted False -> True after 490 s.
    claim["status"]["conditions"].append({"type": "Drifted", "status": "False", "lastTransitionTime": format_time(1010)})
    drifted = [{"type": "Drifted", "status": "True", "lastTransitionTime": format_time(1500)}]
    assert observe_condition_transitions(metrics, claim, drifted) == 1
    assert transition(metrics, "sum", "Drifted", "False", "True") == 490.0


# --- karpenter_nodes_allocatable ---------------------------------------------------------------------------


def node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable}}


MANAGED_LABELS = {L.NODEPOOL: "general", L.INSTANCE_TYPE: "m6g.xlarge", L.CAPACITY_TYPE: "spot",
                  L.ZONE: "us-east-1a", L.REGION: "us-east-1", L.ARCH: "arm64", L.OS: "linux"}


def allocatable_labels(node_name: str, resource: str, **overrides: str) -> dict[str, str]:
    # Every well-known label of Karpenter's AWS provider is a metric label; those the node lacks are "".
    labels = {**dict.fromkeys(NODE_METRIC_LABELS.values(), ""), "nodepool": "general", "instance_type": "m6g.xlarge", "capacity_type": "spot",
              "zone": "us-east-1a", "region": "us-east-1", "arch": "arm64", "os": "linux",
              "node_name": node_name, "phase": "", "managed": "true", "resource_type": resource}
    return {**labels, **overrides}


def test_node_allocatable_per_node_and_resource(ctx, cluster) -> None:
    cluster.create(r.NODES, node("ip-1", MANAGED_LABELS, {"cpu": "3920m", "memory": "15136Mi", "pods": "58",
                                                          "ephemeral-storage": "18242267924"}))
    cluster.create(r.NODES, node("system-1", {L.INSTANCE_TYPE: "t3.medium"}, {"cpu": "1930m"}))
    StateMetricsController(ctx).reconcile()
    m = ctx.metrics
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "cpu")) == 3.92
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "memory")) == 15136 * 2**20
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "pods")) == 58.0
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "ephemeral_storage")) == 18242267924.0
    unmanaged = {k: "" for k in ("nodepool", "capacity_type", "zone", "region", "arch", "os")}
    assert m.value(ALLOCATABLE, allocatable_labels("system-1", "cpu", instance_type="t3.medium", managed="false",
                                                   **unmanaged)) == 1.93
    samples = [s for fam in m.registry.collect() if fam.name == ALLOCATABLE for s in fam.samples]
    assert len(samples) == 5


def test_node_series_follow_changes_and_deletions(ctx, cluster) -> None:
    cluster.create(r.NODES, node("ip-1", MANAGED_LABELS, {"cpu": "4", "memory": "16Gi"}))
    cluster.create(r.NODES, node("ip-2", MANAGED_LABELS, {"cpu": "8"}))
    metrics_ctl = StateMetricsController(ctx)
    metrics_ctl.reconcile()
    # ip-1 loses its memory entry and moves to on-demand; ip-2 is deleted.
    cluster.replace(r.NODES, {**node("ip-1", {**MANAGED_LABELS, L.CAPACITY_TYPE: "on-demand"}, {"cpu": "3500m"}),
                              "metadata": {**cluster.get(r.NODES, "ip-1")["metadata"],
                                           "labels": {**MANAGED_LABELS, L.CAPACITY_TYPE: "on-demand"}}})
    cluster.delete(r.NODES, "ip-2")
    metrics_ctl.reconcile()
    m = ctx.metrics
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "cpu", capacity_type="on-demand")) == 3.5
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "cpu")) is None
    assert m.value(ALLOCATABLE, allocatable_labels("ip-1", "memory")) is None
    assert m.value(ALLOCATABLE, allocatable_labels("ip-2", "cpu")) is None
    samples = [s for fam in m.registry.collect() if fam.name == ALLOCATABLE for s in fam.samples]
    assert [(s.labels["node_name"], s.labels["resource_type"], s.value) for s in samples] == [("ip-1", "cpu", 3.5)]


def test_same_snapshot_is_not_recomputed(ctx, cluster) -> None:
    cluster.create(r.NODES, node("ip-1", MANAGED_LABELS, {"cpu": "4"}))
    state = snapshot(cluster)
    metrics_ctl = StateMetricsController(ctx)
    metrics_ctl.reconcile(state)
    ctx.metrics.nodes_allocatable.clear()
    metrics_ctl.reconcile(state)  # identical snapshot: nothing to do
    assert ctx.metrics.value(ALLOCATABLE, allocatable_labels("ip-1", "cpu")) is None
    metrics_ctl.reconcile(snapshot(cluster))  # new snapshot, unchanged node (same resourceVersion): cached
    assert ctx.metrics.value(ALLOCATABLE, allocatable_labels("ip-1", "cpu")) is None
    cluster.patch(r.NODES, "ip-1", {"status": {"allocatable": {"cpu": "2"}}})
    metrics_ctl.reconcile(snapshot(cluster))
    assert ctx.metrics.value(ALLOCATABLE, allocatable_labels("ip-1", "cpu")) == 2.0


# --- karpenter_pods_startup_duration_seconds ---------------------------------------------------------------


def run_pod(cluster, name: str, at: float) -> None:
    cluster.patch_status(r.PODS, name, {"phase": "Running", "startTime": format_time(at - 1), "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(at)}]}, "default")


def test_pod_startup_observed_once_from_creation_to_ready(ctx, cluster, clock) -> None:
    start = clock()
    cluster.create(r.PODS, {**pending_pod("old"), "status": {"phase": "Running"}})  # running before we started
    cluster.create(r.PODS, pending_pod("web-0"))
    metrics_ctl = StateMetricsController(ctx)
    metrics_ctl.reconcile()
    assert ctx.metrics.value(f"{STARTUP}_count") == 0.0
    clock.advance(10)
    cluster.create(r.PODS, pending_pod("web-1"))  # created at +10 s, Running before the next pass
    run_pod(cluster, "web-0", start + 75)
    run_pod(cluster, "web-1", start + 40)
    clock.advance(70)
    metrics_ctl.reconcile()
    assert ctx.metrics.value(f"{STARTUP}_count") == 2.0
    assert ctx.metrics.value(f"{STARTUP}_sum") == 75.0 + 30.0
    assert ctx.metrics.value(f"{STARTUP}_bucket", {"le": "30.0"}) == 1.0
    assert ctx.metrics.value(f"{STARTUP}_bucket", {"le": "60.0"}) == 1.0
    assert ctx.metrics.value(f"{STARTUP}_bucket", {"le": "90.0"}) == 2.0
    clock.advance(10)
    cluster.patch(r.PODS, "web-0", {"metadata": {"labels": {"touched": "yes"}}}, "default")
    metrics_ctl.reconcile()  # still running: not observed again
    assert ctx.metrics.value(f"{STARTUP}_count") == 2.0


# --- wired into the controller manager ---------------------------------------------------------------------


def test_manager_step_exports_dashboard_metrics(ctx, cluster, clock) -> None:
    manager = ControllerManager(ctx)
    cluster.create(r.PODS, pending_pod("web-0"))
    manager.step()
    clock.advance(2)
    manager.step()  # provision, then launch in the same pass
    claim = cluster.list(r.NODECLAIMS)[0]
    clock.advance(30)
    cluster.create(r.NODES, node_for(claim))
    manager.step()
    cluster.bind_pod("default", "web-0", "ip-10-0-0-1.ec2.internal")  # kube-scheduler: the readiness hold is lifted
    manager.step()
    allocatable = claim["status"]["allocatable"]
    labels = {**allocatable_labels("ip-10-0-0-1.ec2.internal", "cpu"), "instance_type": "c5.large",
              "capacity_type": "on-demand", "arch": "amd64",
              "instance_family": "c5"}  # labels the NodeClaim gave the Node at registration
    assert allocatable["cpu"] == "1900m"
    assert ctx.metrics.value(ALLOCATABLE, labels) == 1.9
    assert ctx.metrics.value(ALLOCATABLE, {**labels, "resource_type": "memory"}) == 4026531840.0
    assert transition(ctx.metrics, "count", "Ready", "Unknown", "True") == 1.0
