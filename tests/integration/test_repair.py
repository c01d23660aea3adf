"""Node repair end to end (gate NodeRepair, AWS gate RebootForRepair): the emulator as API server, moto as EC2.

The kubelet's part is played by writing the Node's ``Ready`` condition with a ``lastTransitionTime`` 31 minutes
ago (past the AWS provider's 30-minute toleration), so the test needs no 30-minute wait. Every request the
controller sends is judged by the RBAC replay and every AWS call (``ec2:RebootInstances`` included) by the IAM
replay.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubernetes import client as k8s

from nodewright.api import labels as L
from nodewright.settings import AwsFeatureGates, FeatureGates

from .awsmoto import Account
from .emulator import EmulatorThread
from .harness import Replica, apply_pool, condition, pending_pod, register_node, run_pod, wait_for


def ago(minutes: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def not_ready_since(core: k8s.CoreV1Api, node: str, minutes: float) -> None:
    """The kubelet stopped posting: the node lifecycle controller set Ready=Unknown ``minutes`` ago."""
    core.patch_node_status(node, {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "lastTransitionTime": ago(minutes)}]}})


def unhealthy_node(kube: EmulatorThread, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi,
                   account: Account) -> tuple[dict[str, Any], str]:
    """A launched NodeClaim whose Node runs two pods a PodDisruptionBudget protects, then turns NotReady."""
    apply_pool(custom)
    for i in range(2):
        pending_pod(core, f"web-{i}")
    claim = wait_for(lambda: next((c for c in kube.emulator.snapshot("nodeclaims")
                                   if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 15, "a launched NodeClaim")
    node = register_node(core, claim)
    wait_for(lambda: len(kube.emulator.bindings) == 2, 10, "two bindings")
    for pod in ("web-0", "web-1"):
        run_pod(core, pod, node)
    k8s.PolicyV1Api(core.api_client).create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    not_ready_since(core, node, 31)
    return claim, node


def state_of(account: Account, claim: dict[str, Any]) -> str:
    instance_id = claim["status"]["providerID"].rsplit("/", 1)[-1]
    return next(i["State"]["Name"] for i in account.instances() if i["InstanceId"] == instance_id)


def test_reboot_for_repair_reboots_then_replaces_forcefully_past_the_pdb(kube, account, replicas, core,
                                                                        custom) -> None:
    replica = Replica(kube, account, "a", bind_pods=True, feature_gates=FeatureGates(node_repair=True),
                      aws_feature_gates=AwsFeatureGates(reboot_for_repair=True)).start()
    replicas.append(replica)
    claim, node = unhealthy_node(kube, core, custom, account)
    name = claim["metadata"]["name"]
    rebooted = wait_for(lambda: ((kube.emulator.peek("nodeclaims", name) or {}).get("metadata", {})
                                 .get("annotations") or {}).get(L.NODECLAIM_REPAIR_REBOOTED), 10, "the reboot")
    assert state_of(account, claim) == "running"  # rebooted in place, not replaced
    current = kube.emulator.peek("nodeclaims", name)
    assert current is not None and not current["metadata"].get("deletionTimestamp")
    assert [e["reason"] for e in kube.emulator.snapshot("events", "default")
            if e["involvedObject"]["name"] == name and e["reason"].startswith("NodeRepair")] == ["NodeRepairRebooted"]
    assert replica.metric("nodewright_nodeclaims_repair_reboots_total",
                          {"nodepool": "general", "condition": "ready"}) == 1
    # Still NotReady a toleration after the reboot: replaced, forcefully (the PDB allows no eviction).
    custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", name, {
        "metadata": {"annotations": {L.NODECLAIM_REPAIR_REBOOTED: ago(31)}}})
    assert rebooted
    wait_for(lambda: kube.emulator.peek("nodeclaims", name) is None, 20, "the unhealthy NodeClaim to be gone")
    assert kube.emulator.peek("nodes", node) is None
    assert kube.emulator.evictions == []  # deleted, never evicted: repair does not wait for the PDB
    assert state_of(account, claim) in ("shutting-down", "terminated")
    labels = {"nodepool": "general", "capacity_type": "on-demand"}
    assert replica.metric("karpenter_nodeclaims_disrupted_total", {
        "reason": "unhealthy", "consolidation_policy": "", "termination_mode": "graceful", **labels}) == 1
    assert replica.metric("karpenter_nodeclaims_unhealthy_disrupted_total",
                          {"condition": "ready", "image_id": claim["status"]["imageID"], **labels}) == 1
    assert replica.metric("nodewright_nodeclaims_repair_reboots_total",
                          {"nodepool": "general", "condition": "ready"}) == 1


def test_without_the_gate_an_unhealthy_node_is_left_alone(kube, account, replicas, core, custom) -> None:
    replica = Replica(kube, account, "a", bind_pods=True).start()
    replicas.append(replica)
    claim, node = unhealthy_node(kube, core, custom, account)
    assert replica.runtime.manager.repair is None
    # a few passes of every controller (0.1 s reconcile period)
    passes = replica.metric("controller_runtime_reconcile_total", {"controller": "termination", "result": "success"})
    wait_for(lambda: replica.metric("controller_runtime_reconcile_total",
                                    {"controller": "termination", "result": "success"}) >= passes + 5, 10, "passes")
    current = kube.emulator.peek("nodeclaims", claim["metadata"]["name"])
    assert current is not None and not current["metadata"].get("deletionTimestamp")
    assert state_of(account, claim) == "running" and kube.emulator.peek("nodes", node) is not None
