"""Node repair (gate NodeRepair): policy decisions, the safety limit, forceful deletion, RebootForRepair.

A port of kubernetes-sigs/karpenter ``pkg/controllers/node/health/suite_test.go`` (main, 2026-08-20; behaviour
only, our own code), every ``It`` -> the test here:

- Reconciliation "should delete nodes that are unhealthy by the cloud provider" ->
  ``test_an_unhealthy_node_past_its_toleration_is_deleted_forcefully_with_metrics``; "should not delete node when
  unhealthy type / health status does not match", "... when health duration is not reached" ->
  ``test_nodes_that_are_not_unhealthy_past_a_toleration_are_kept``; "should set annotation termination grace period
  when force termination is started" -> the first test; "should not respect termination grace period if set on the
  nodepool" -> ``test_budgets_do_not_disrupt_and_the_nodepool_grace_period_do_not_hold_repair``; "should not update
  termination grace period if set before the current time" -> ``test_an_earlier_termination_timestamp_is_kept``;
  "should return the requeue interval for the condition closest to its terminationDuration" / "... for the time
  between now and when the nodeClaim termination time" -> ``test_the_condition_whose_toleration_ends_first_counts``,
  ``test_next_due_is_the_toleration_end_or_five_minutes_when_held`` (nodewright passes every reconcile period; the
  requeue time is what the simulator wakes at).
- Forceful termination "should ignore node disruption budgets", "should ignore do-not-disrupt on a node" ->
  ``test_budgets_do_not_disrupt_and_the_nodepool_grace_period_do_not_hold_repair``; "should ignore unhealthy nodes if
  more then 20% of the nodes are unhealthy in a nodepool" ->
  ``test_more_than_twenty_percent_unhealthy_in_a_nodepool_blocks_repair_with_events``; "... in a cluster" ->
  ``test_the_limit_is_per_nodepool_and_cluster_wide_without_one``; "should consider round up when there is a low
  number of nodes for a nodepool" -> ``test_the_threshold_is_twenty_percent_rounded_up`` and the cluster-wide test.
- Metrics "should fire a karpenter_nodeclaims_disrupted_total metric when unhealthy" -> the first test.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.api.nodeclaim import NodeClaim
from nodewright.cloud.aws.repair import AWS_REPAIR_POLICIES
from nodewright.cloud.provider import AuthorizationError, RepairPolicy
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.controllers.repair import (
    RepairController,
    condition_label,
    find_unhealthy,
    repair_permitted,
    unhealthy_threshold,
)
from nodewright.controllers.termination import TerminationController
from nodewright.kube import resources as r
from nodewright.kube.objects import format_time, is_deleting

from .fakes import FakeCloudProvider

MINUTE = 60.0


class RepairCloud(FakeCloudProvider):
    """The fake cloud with the AWS provider's repair policies and a recording reboot."""

    def __init__(self, clock, policies=AWS_REPAIR_POLICIES) -> None:
        super().__init__(clock)
        self.policies = policies
        self.reboots: list[str] = []
        self.reboot_errors: list[Exception] = []

    def repair_policies(self):
        return self.policies

    def reboot(self, nodeclaim: NodeClaim) -> None:
        if self.reboot_errors:
            raise self.reboot_errors.pop(0)
        self.reboots.append(nodeclaim.status.provider_id)


@pytest.fixture
def cloud(clock) -> RepairCloud:
    return RepairCloud(clock)


def add_node(cluster, clock, i: int, *, nodepool: str | None = "general", conditions: list[dict[str, Any]] | None = None,
             claim_annotations: dict[str, str] | None = None, claim_spec: dict[str, Any] | None = None,
             node_annotations: dict[str, str] | None = None) -> str:
    """A launched NodeClaim ``claim-<i>`` and its registered Node ``node-<i>``; returns the claim name."""
    pid = f"aws:///us-east-1a/i-{i:017x}"
    labels = {L.CAPACITY_TYPE: "on-demand", **({L.NODEPOOL: nodepool} if nodepool else {})}
    cluster.create(r.NODECLAIMS, {
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": f"claim-{i}", "labels": labels, "finalizers": [L.TERMINATION_FINALIZER],
                     "annotations": dict(claim_annotations or {})},
        "spec": {"requirements": [], "nodeClassRef": {"group": L.AWS_GROUP, "kind": "EC2NodeClass",
                                                      "name": "default"}, **(claim_spec or {})},
        "status": {"providerID": pid, "imageID": "ami-0123", "nodeName": f"node-{i}"}})
    cluster.create(r.NODES, {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"node-{i}", "labels": labels, "finalizers": [L.TERMINATION_FINALIZER],
                     "annotations": dict(node_annotations or {})},
        "spec": {"providerID": pid},
        "status": {"conditions": conditions if conditions is not None else [ready("True", clock() - 3600)]}})
    return f"claim-{i}"


def ready(status: str, since: float, type_: str = "Ready") -> dict[str, Any]:
    return {"type": type_, "status": status, "lastTransitionTime": format_time(since)}


def deleting(cluster, name: str) -> bool:
    claim = cluster.get(r.NODECLAIMS, name)
    return claim is not None and is_deleting(claim)


# --- pure decisions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("total", "allowed"), [(0, 0), (1, 1), (3, 1), (5, 1), (6, 2), (10, 2), (11, 3), (100, 20)])
def test_the_threshold_is_twenty_percent_rounded_up(total, allowed) -> None:
    assert unhealthy_threshold(total) == allowed
    assert repair_permitted(allowed, total) and not repair_permitted(allowed + 1, total)


def test_the_condition_whose_toleration_ends_first_counts() -> None:
    now = 10_000.0
    node = {"status": {"conditions": [ready("False", now - 5 * MINUTE),  # Ready: due in 25 min
                                      ready("False", now - 8 * MINUTE, "AcceleratedHardwareReady"),  # due in 2 min
                                      ready("False", now, "KernelReady")]}}
    found = find_unhealthy(node, AWS_REPAIR_POLICIES, now)
    assert (found.condition_type, found.status, found.due) == ("AcceleratedHardwareReady", "False", now + 2 * MINUTE)
    assert find_unhealthy({"status": {"conditions": [ready("True", 0)]}}, AWS_REPAIR_POLICIES, now) is None
    # a status no policy names (KernelReady=Unknown) is not unhealthy
    assert find_unhealthy({"status": {"conditions": [ready("Unknown", 0, "KernelReady")]}}, AWS_REPAIR_POLICIES,
                          now) is None
    # no lastTransitionTime: counted from when it was first seen, not from the epoch
    found = find_unhealthy({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}, AWS_REPAIR_POLICIES,
                           now)
    assert found.due == now + 30 * MINUTE
    assert [condition_label(p.condition_type) for p in AWS_REPAIR_POLICIES] == [
        "ready", "ready", "accelerated_hardware_ready", "storage_ready", "networking_ready", "kernel_ready",
        "container_runtime_ready"]


# --- the controller -----------------------------------------------------------------------------------------


def test_an_unhealthy_node_past_its_toleration_is_deleted_forcefully_with_metrics(ctx, cluster, clock) -> None:
    name = add_node(cluster, clock, 1, conditions=[ready("False", clock() - 31 * MINUTE)])
    add_node(cluster, clock, 2)
    assert RepairController(ctx).reconcile() == [name]
    claim = cluster.get(r.NODECLAIMS, name)
    assert is_deleting(claim)
    assert claim["metadata"]["annotations"][L.NODECLAIM_TERMINATION_TIMESTAMP] == format_time(clock())
    assert not deleting(cluster, "claim-2")
    m = ctx.metrics
    assert m.nodeclaims_disrupted.labels("unhealthy", "general", "on-demand", "", "graceful")._value.get() == 1
    assert m.nodeclaims_unhealthy_disrupted.labels("ready", "general", "on-demand", "ami-0123")._value.get() == 1


@pytest.mark.parametrize("conditions", [
    [ready("False", 0, "FooHealthy")],  # a type no policy names
    [ready("True", 0)],  # a status no policy names
    [ready("False", 1_784_548_800.0 - 29 * MINUTE)],  # toleration (30 min) not reached
    [ready("False", 1_784_548_800.0 - 9 * MINUTE, "AcceleratedHardwareReady")],  # 10 min not reached
])
def test_nodes_that_are_not_unhealthy_past_a_toleration_are_kept(ctx, cluster, clock, conditions) -> None:
    add_node(cluster, clock, 1, conditions=conditions)
    assert RepairController(ctx).reconcile() == []
    assert not deleting(cluster, "claim-1")


def test_the_toleration_end_is_acted_on_at_the_next_pass(ctx, cluster, clock) -> None:
    add_node(cluster, clock, 1, conditions=[ready("Unknown", clock() - 27 * MINUTE)])
    controller = RepairController(ctx)
    assert controller.reconcile() == []
    clock.advance(3 * MINUTE)
    assert controller.reconcile() == ["claim-1"]


def test_an_earlier_termination_timestamp_is_kept(ctx, cluster, clock) -> None:
    earlier = format_time(clock() - 600)
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 31 * MINUTE)],
             claim_annotations={L.NODECLAIM_TERMINATION_TIMESTAMP: earlier})
    RepairController(ctx).reconcile()
    assert cluster.get(r.NODECLAIMS, "claim-1")["metadata"]["annotations"][L.NODECLAIM_TERMINATION_TIMESTAMP] == earlier


def test_budgets_do_not_disrupt_and_the_nodepool_grace_period_do_not_hold_repair(ctx, cluster, clock) -> None:
    cluster.patch(r.NODEPOOLS, "general", {"spec": {"disruption": {"budgets": [{"nodes": "0"}]}}})
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 31 * MINUTE)],
             node_annotations={L.DO_NOT_DISRUPT: "true"}, claim_spec={"terminationGracePeriod": "24h"})
    cluster.create(r.PODS, {"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "db", "namespace": "default", "labels": {"app": "db"},
                                         "annotations": {L.DO_NOT_DISRUPT: "true"}},
                            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
                            "status": {"phase": "Running"}})
    cluster.create(r.PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": "db", "namespace": "default"},
                            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}})
    assert RepairController(ctx).reconcile() == ["claim-1"]
    termination = TerminationController(ctx)
    termination.reconcile()  # NodeClaim -> Node deleted
    termination.reconcile()  # the Node drains: the pod is deleted, not evicted (no 429 from the PDB)
    assert cluster.get(r.PODS, "db", "default") is None
    assert [e["reason"] for e in cluster.events if e["name"] == "db"] == ["Deleted"]


def test_more_than_twenty_percent_unhealthy_in_a_nodepool_blocks_repair_with_events(ctx, cluster, clock) -> None:
    for i in range(10):  # 3 of 10 unhealthy: over the 2 allowed
        add_node(cluster, clock, i, conditions=[ready("False", clock() - 31 * MINUTE)] if i < 3 else None)
    controller = RepairController(ctx)
    assert controller.reconcile() == []
    blocked = [(e["kind"], e["name"], e["type"], e["message"]) for e in cluster.events
               if e["reason"] == "NodeRepairBlocked"]
    message = "more than 20% nodes are unhealthy in the nodepool"
    expected = [("Node", "node-0"), ("NodeClaim", "claim-0"), ("NodePool", "general"),  # the NodePool's once
                ("Node", "node-1"), ("NodeClaim", "claim-1"), ("Node", "node-2"), ("NodeClaim", "claim-2")]
    assert blocked == [(kind, name, "Warning", message) for kind, name in expected]
    # deduplicated for 15 minutes, then sent again
    controller.reconcile()
    assert len([e for e in cluster.events if e["reason"] == "NodeRepairBlocked"]) == 7
    clock.advance(15 * MINUTE)
    controller.reconcile()
    assert len([e for e in cluster.events if e["reason"] == "NodeRepairBlocked"]) == 14
    # one recovers: 2 of 10 is within the limit, both are repaired
    cluster.patch(r.NODES, "node-0", {"status": {"conditions": [ready("True", clock())]}})
    assert controller.reconcile() == ["claim-1", "claim-2"]


def test_the_limit_is_per_nodepool_and_cluster_wide_without_one(ctx, cluster, clock) -> None:
    bad = [ready("False", clock() - 31 * MINUTE)]
    add_node(cluster, clock, 1, nodepool="other", conditions=bad)  # 1 of 1 in its pool: allowed (rounded up)
    for i in range(2, 6):
        add_node(cluster, clock, i)  # general: healthy
    assert RepairController(ctx).reconcile() == ["claim-1"]
    # NodeClaims without a NodePool are measured against all 7 Nodes: 3 unhealthy > ceil(7 x 20%) = 2
    add_node(cluster, clock, 6, nodepool=None, conditions=bad)
    add_node(cluster, clock, 7, nodepool=None, conditions=bad)
    assert RepairController(ctx).reconcile() == []  # node-1 still counts while it drains
    events = {(e["kind"], e["message"]) for e in cluster.events if e["reason"] == "NodeRepairBlocked"}
    assert events == {("Node", "more than 20% nodes are unhealthy in the cluster"),
                      ("NodeClaim", "more than 20% nodes are unhealthy in the cluster")}


def test_next_due_is_the_toleration_end_or_five_minutes_when_held(ctx, cluster, clock) -> None:
    from nodewright.state.cluster import snapshot

    controller = RepairController(ctx)
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 27 * MINUTE),
                                            ready("False", clock() - 5 * MINUTE, "AcceleratedHardwareReady")])
    assert controller.next_due(snapshot(cluster), clock()) == clock() + 3 * MINUTE  # Ready's ends first
    for i in range(2, 4):  # 3 of 3 past the toleration: held, re-checked in 5 minutes
        add_node(cluster, clock, i, conditions=[ready("False", clock() - 31 * MINUTE)])
    clock.advance(3 * MINUTE)
    assert controller.reconcile() == []
    assert controller.next_due(snapshot(cluster), clock()) == clock() + 5 * MINUTE


def test_an_unmanaged_node_is_never_repaired(ctx, cluster, clock) -> None:
    cluster.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "byo"},
                             "spec": {"providerID": "aws:///us-east-1a/i-0000000000000abcd"},
                             "status": {"conditions": [ready("False", 0)]}})
    assert RepairController(ctx).reconcile() == []
    assert cluster.get(r.NODES, "byo") is not None


def test_the_gate_off_or_a_cloud_without_policies_runs_no_repair(ctx, cluster, clock, cloud) -> None:
    add_node(cluster, clock, 1, conditions=[ready("False", 0)])
    off = ControllerManager(ctx, ControllerOptions())
    assert off.repair is None
    off.step()
    assert not deleting(cluster, "claim-1")
    cloud.policies = ()
    assert ControllerManager(ctx, ControllerOptions(node_repair=True)).repair is None
    cloud.policies = AWS_REPAIR_POLICIES
    on = ControllerManager(ctx, ControllerOptions(node_repair=True))
    on.step()
    assert on.repair.repaired == ["claim-1"] and deleting(cluster, "claim-1")


def test_custom_policies_are_the_clouds_to_give(ctx, cluster, clock, cloud) -> None:
    cloud.policies = (RepairPolicy("FooHealthy", "False", 60.0),)
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 61, "FooHealthy")])
    add_node(cluster, clock, 2, conditions=[ready("False", 0)])  # Ready=False is not a policy of this cloud
    assert RepairController(ctx).reconcile() == ["claim-1"]


# --- RebootForRepair ------------------------------------------------------------------------------------------


def test_reboot_first_then_replace_if_still_unhealthy_a_toleration_later(ctx, cluster, clock, cloud) -> None:
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 31 * MINUTE)])
    controller = RepairController(ctx, reboot=True)
    assert controller.reconcile() == []
    assert cloud.reboots == ["aws:///us-east-1a/i-00000000000000001"] and controller.rebooted == ["claim-1"]
    claim = cluster.get(r.NODECLAIMS, "claim-1")
    assert claim["metadata"]["annotations"][L.NODECLAIM_REPAIR_REBOOTED] == format_time(clock())
    assert not is_deleting(claim)
    assert [(e["reason"], e["type"]) for e in cluster.events if e["name"] == "claim-1"] == [
        ("NodeRepairRebooted", "Normal")]
    assert ctx.metrics.nodeclaims_repair_reboots.labels("general", "ready")._value.get() == 1
    clock.advance(29 * MINUTE)
    assert controller.reconcile() == [] and len(cloud.reboots) == 1  # one reboot, then a toleration's wait
    clock.advance(MINUTE)
    assert controller.reconcile() == ["claim-1"] and len(cloud.reboots) == 1


def test_a_node_healthy_after_the_reboot_is_kept_and_a_later_failure_reboots_again(ctx, cluster, clock,
                                                                                   cloud) -> None:
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 31 * MINUTE)])
    controller = RepairController(ctx, reboot=True)
    controller.reconcile()
    clock.advance(2 * MINUTE)
    cluster.patch(r.NODES, "node-1", {"status": {"conditions": [ready("True", clock())]}})
    controller.reconcile()
    assert L.NODECLAIM_REPAIR_REBOOTED not in cluster.get(r.NODECLAIMS, "claim-1")["metadata"]["annotations"]
    clock.advance(60 * MINUTE)
    cluster.patch(r.NODES, "node-1", {"status": {"conditions": [ready("False", clock() - 31 * MINUTE)]}})
    assert controller.reconcile() == [] and len(cloud.reboots) == 2


def test_a_refused_reboot_replaces_the_node(ctx, cluster, clock, cloud) -> None:
    cloud.reboot_errors.append(AuthorizationError("may not ec2:RebootInstances", action="ec2:RebootInstances"))
    add_node(cluster, clock, 1, conditions=[ready("False", clock() - 31 * MINUTE)])
    assert RepairController(ctx, reboot=True).reconcile() == ["claim-1"]
    assert ctx.metrics.cloudprovider_errors.labels("node.health", "Reboot", "fake",
                                                   "AuthorizationError")._value.get() == 1


def test_the_safety_limit_holds_reboots_too(ctx, cluster, clock, cloud) -> None:
    for i in range(2):
        add_node(cluster, clock, i, conditions=[ready("False", clock() - 31 * MINUTE)])
    assert RepairController(ctx, reboot=True).reconcile() == [] and cloud.reboots == []
