"""The disruption controller on the in-memory cluster: validate after 15 s, taint, replace, wait Ready, delete,
roll back, expire, re-stamp hashes, metrics and events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.api.hashing import NODEPOOL_HASH_VERSION, nodepool_hash, nodepool_hash_annotations
from nodewright.cloud.instancetype import InstanceType
from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator, has_disrupted_taint
from nodewright.disruption import ConsolidationOptions, DecisionOptions
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import is_deleting, name_of
from nodewright.metrics import Metrics

from .helpers import BY_NAME, CATALOG, HOUR, NOW

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
    "spec": {"template": {"spec": {
        "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}},
        "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}},
}


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


class Cloud:
    name = "test"

    def __init__(self) -> None:
        self.drift: dict[str, str] = {}

    def get_instance_types(self, nodepool: Any) -> list[Any]:
        return list(CATALOG)

    def is_drifted(self, nodeclaim: Any) -> str | None:
        return self.drift.get(nodeclaim.metadata.name)


@pytest.fixture
def env() -> tuple[InMemoryCluster, Clock, Cloud, DisruptionController, Metrics]:
    clock, cloud, metrics = Clock(), Cloud(), Metrics()
    cluster = InMemoryCluster(clock, seed=3)
    cluster.create(r.NODEPOOLS, NODEPOOL)
    ctx = Context(cluster, cloud, clock, metrics, "demo")  # type: ignore[arg-type]
    return cluster, clock, cloud, DisruptionController(ctx, Terminator(ctx)), metrics


def add_node(cluster: InMemoryCluster, name: str, type_name: str, cpus: list[int], *, hashed: bool = True,
             expire: str = "720h", pod_annotations: dict[str, str] | None = None,
             types: Mapping[str, InstanceType] = BY_NAME) -> None:
    it = types[type_name]
    labels = {L.NODEPOOL: "default", L.INSTANCE_TYPE: type_name, L.ZONE: "us-east-1a",
              L.CAPACITY_TYPE: "on-demand", L.INITIALIZED: "true"}
    pid = f"aws:///us-east-1a/i-{abs(hash(name)) % 10**12:017x}"
    alloc = {"cpu": f"{it.capacity['cpu']}m", "memory": str(it.capacity["memory"]), "pods": "110"}
    cluster.create(r.NODECLAIMS, {
        "metadata": {"name": f"{name}-claim", "labels": dict(labels), "finalizers": [L.TERMINATION_FINALIZER],
                     "annotations": nodepool_hash_annotations(NODEPOOL) if hashed else {}},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                      "name": "default"}, "expireAfter": expire},
        "status": {"providerID": pid, "nodeName": name, "allocatable": alloc,
                   "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}]}})
    cluster.create(r.NODES, {
        "metadata": {"name": name, "labels": {**labels, L.HOSTNAME: name}, "finalizers": [L.TERMINATION_FINALIZER]},
        "spec": {"providerID": pid}, "status": {"allocatable": alloc, "capacity": alloc,
                                                "conditions": [{"type": "Ready", "status": "True"}]}})
    for i, cpu in enumerate(cpus):
        cluster.create(r.PODS, {
            "metadata": {"name": f"{name}-p{i}", "namespace": "default", "labels": {"app": name},
                         "annotations": dict(pod_annotations or {})},
            "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m"}}}]},
            "status": {"phase": "Running"}})


def set_ready(cluster: InMemoryCluster, claim: str) -> None:
    cluster.patch_status(r.NODECLAIMS, claim, {"conditions": [{"type": "Ready", "status": "True"}]})


def test_consolidation_waits_15s_launches_a_replacement_waits_ready_then_deletes(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    for i in range(3):
        add_node(cluster, f"n{i}", "c.medium", [500])
    assert controller.reconcile() is None and controller.command is not None
    clock.now += 10
    assert controller.reconcile() is None and controller.command.phase == "validating"
    clock.now += 5
    assert controller.reconcile() is None
    assert all(has_disrupted_taint(cluster.get(r.NODES, f"n{i}")) for i in range(3))
    claims = [c for c in cluster.list(r.NODECLAIMS) if name_of(c).startswith("default-")]
    assert len(claims) == 1
    replacement = claims[0]
    types = next(q["values"] for q in replacement["spec"]["requirements"] if q["key"] == L.INSTANCE_TYPE)
    assert types == ["c.large", "c.medium", "c.small"]
    assert replacement["metadata"]["annotations"][L.NODEPOOL_HASH] == nodepool_hash(NODEPOOL)
    assert metrics.value("nodewright_disruption_replacements_total", {"reason": "underutilized"}) == 1
    clock.now += 30
    assert controller.reconcile() is None  # not Ready yet: nothing deleted
    assert not any(is_deleting(cluster.get(r.NODECLAIMS, f"n{i}-claim")) for i in range(3))
    set_ready(cluster, name_of(replacement))
    done = controller.reconcile()
    assert done is not None and done.message() == "Consolidating 3 nodes into 1 c.small, saving $0.50/h"
    assert all(is_deleting(cluster.get(r.NODECLAIMS, f"n{i}-claim")) for i in range(3))
    assert metrics.value("karpenter_voluntary_disruption_decisions_total",
                         {"decision": "replace", "reason": "underutilized",
                          "consolidation_type": "multi"}) == 1
    messages = [e["message"] for e in cluster.events if e["reason"] == "DisruptionTerminating"]
    assert messages[0] == "Disrupting NodeClaim: Underutilized Consolidating 3 nodes into 1 c.small, saving $0.50/h"


def test_failed_replacement_rolls_back_the_taints(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    add_node(cluster, "big", "c.large", [3000])
    controller.reconcile()
    clock.now += 15
    controller.reconcile()
    assert has_disrupted_taint(cluster.get(r.NODES, "big"))
    replacement = controller.command.replacements[0]
    cluster.delete(r.NODECLAIMS, replacement)  # e.g. insufficient capacity
    clock.now += 10
    controller.reconcile()
    assert controller.command is None
    assert not has_disrupted_taint(cluster.get(r.NODES, "big"))
    assert not is_deleting(cluster.get(r.NODECLAIMS, "big-claim"))
    assert metrics.value("karpenter_voluntary_disruption_decisions_total",
                         {"decision": "replace", "reason": "underutilized",
                          "consolidation_type": "single"}) is None
    assert metrics.value("karpenter_voluntary_disruption_queue_failures_total",
                         {"decision": "replace", "reason": "underutilized", "consolidation_type": "single"}) == 1
    assert any(e["reason"] == "DisruptionFailed" for e in cluster.events)


def test_emptiness_is_revalidated_and_dropped_when_a_pod_arrives(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    add_node(cluster, "busy", "c.medium", [3900])
    add_node(cluster, "empty", "c.medium", [])
    controller.reconcile()
    assert controller.command is not None and controller.command.decision.method == "emptiness"
    cluster.create(r.PODS, {"metadata": {"name": "late", "namespace": "default"},
                            "spec": {"nodeName": "empty", "containers": [{"name": "c"}]}, "status": {"phase": "Running"}})
    clock.now += 15
    assert controller.reconcile() is None and controller.command is None
    assert not has_disrupted_taint(cluster.get(r.NODES, "empty"))


def test_emptiness_deletes_after_validation(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    add_node(cluster, "busy", "c.medium", [3900])
    add_node(cluster, "empty", "c.medium", [])
    controller.reconcile()
    clock.now += 15
    done = controller.reconcile()
    assert done is not None and done.message() == "Deleting 1 empty node, saving $0.20/h"
    assert is_deleting(cluster.get(r.NODECLAIMS, "empty-claim"))
    assert metrics.value("karpenter_voluntary_disruption_decisions_total", {"decision": "delete", "reason": "empty",
                                                                       "consolidation_type": "empty"}) == 1
    assert metrics.value("karpenter_voluntary_disruption_decisions_by_nodepool_total", {
        "nodepool": "default", "decision": "delete", "reason": "empty", "consolidation_type": "empty"}) == 1


def test_expiration_is_immediate_and_ignores_do_not_disrupt(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    add_node(cluster, "old", "c.medium", [3900], expire="1h", pod_annotations={L.DO_NOT_DISRUPT: "true"})
    clock.now += HOUR
    controller.reconcile()
    claim = cluster.get(r.NODECLAIMS, "old-claim")
    assert is_deleting(claim)
    reason = next(c for c in claim["status"]["conditions"] if c["type"] == L.CONDITION_DISRUPTION_REASON)
    assert reason["reason"] == "Expired"
    assert metrics.value("karpenter_voluntary_disruption_decisions_total", {"decision": "delete", "reason": "expired",
                                                                       "consolidation_type": ""}) == 1


def test_claims_without_our_hash_version_are_restamped_not_drifted(env: Any) -> None:
    cluster, clock, cloud, controller, _ = env
    add_node(cluster, "legacy", "c.medium", [3900], hashed=False)
    controller.reconcile()
    ann = cluster.get(r.NODECLAIMS, "legacy-claim")["metadata"]["annotations"]
    assert ann == {L.NODEPOOL_HASH: nodepool_hash(NODEPOOL), L.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
    assert controller.command is None
    # Changing the template now drifts it; the cloud's reasons are consulted too.
    cluster.patch(r.NODEPOOLS, "default", {"spec": {"template": {"metadata": {"labels": {"team": "web"}}}}})
    clock.now += 10
    controller.reconcile()
    assert controller.command is not None and controller.command.decision.detail == {"legacy": "NodePoolDrifted"}


def drifted_condition(cluster: InMemoryCluster, claim: str) -> dict[str, Any] | None:
    conditions = (cluster.get(r.NODECLAIMS, claim) or {}).get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == L.CONDITION_DRIFTED), None)


def test_drifted_condition_is_set_with_the_reason_and_removed_when_drift_goes_away(env: Any) -> None:
    cluster, clock, cloud, controller, _ = env
    add_node(cluster, "n0", "c.medium", [3900])
    controller.reconcile()
    assert drifted_condition(cluster, "n0-claim") is None
    cloud.drift["n0-claim"] = "AMIDrift"
    controller.drift_check_period = 0.0
    clock.now += 1
    controller.reconcile()
    cond = drifted_condition(cluster, "n0-claim")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "AMIDrift")
    # Other conditions are untouched.
    assert {c["type"] for c in cluster.get(r.NODECLAIMS, "n0-claim")["status"]["conditions"]} == {
        "Initialized", "Ready", "Drifted"}
    del cloud.drift["n0-claim"]
    clock.now += 1
    controller.reconcile()
    assert drifted_condition(cluster, "n0-claim") is None


def test_a_node_pods_are_nominated_to_is_not_deleted_as_empty(env: Any) -> None:
    cluster, clock, _, controller, _ = env
    nominated: set[str] = {"empty"}
    controller.nominated = lambda state: set(nominated)
    add_node(cluster, "empty", "c.medium", [])
    assert controller.reconcile() is None and controller.command is None
    nominated.clear()
    clock.now += 10
    controller.reconcile()
    assert controller.command is not None and controller.command.decision.method == "emptiness"
    nominated.add("empty-claim")  # nominated through its NodeClaim (the pod is bound on registration)
    clock.now += 15
    assert controller.reconcile() is None and controller.command is None
    assert not is_deleting(cluster.get(r.NODECLAIMS, "empty-claim"))


def test_budget_and_eligibility_metrics_after_a_decision_pass(env: Any) -> None:
    cluster, clock, cloud, controller, metrics = env
    cluster.patch(r.NODEPOOLS, "default", {"spec": {"disruption": {
        "consolidateAfter": "0s", "budgets": [{"nodes": "50%"}, {"nodes": "0", "reasons": ["Drifted"]}]}}})
    add_node(cluster, "busy", "c.medium", [3900])
    add_node(cluster, "empty", "c.medium", [])
    add_node(cluster, "pinned", "c.medium", [500], pod_annotations={L.DO_NOT_DISRUPT: "true"})
    add_node(cluster, "sick", "c.medium", [500])
    cluster.patch_status(r.NODES, "sick", {"conditions": [{"type": "Ready", "status": "False"}]})
    cloud.drift = {"busy-claim": "AMIDrift", "pinned-claim": "AMIDrift"}
    controller.reconcile()
    # 4 initialized nodes, "sick" (not Ready) consumes the budget: 50% of 4 = 2 for Empty and Underutilized,
    # the Drifted-only budget of 0 wins for Drifted (Karpenter exports the budget before subtracting).
    for reason, allowed in (("Empty", 2), ("Underutilized", 2), ("Drifted", 0)):
        labels = {"nodepool": "default", "reason": reason}
        assert metrics.value("karpenter_nodepools_allowed_disruptions", labels) == allowed
        assert metrics.value("karpenter_nodepools_nodes_consuming_budgets", labels) == 1
    eligible = {reason: metrics.value("karpenter_voluntary_disruption_eligible_nodes", {"reason": reason})
                for reason in ("empty", "drifted", "underutilized")}
    assert eligible == {"empty": 1, "drifted": 1, "underutilized": 3}  # "pinned" has a do-not-disrupt pod


def test_allowed_disruptions_without_an_active_budget_is_karpenters_max_int32(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    cluster.patch(r.NODEPOOLS, "default", {"spec": {"disruption": {"consolidateAfter": "0s", "budgets": [
        {"nodes": "0", "schedule": "0 0 1 1 *", "duration": "1h"}]}}})
    add_node(cluster, "busy", "c.medium", [3900])
    controller.reconcile()
    assert metrics.value("karpenter_nodepools_allowed_disruptions",
                         {"nodepool": "default", "reason": "Empty"}) == 2_147_483_647


def test_consolidation_cut_short_by_its_time_budget_counts_as_a_timeout(env: Any) -> None:
    cluster, clock, _, _, metrics = env
    # An injected clock standing still at 0: single-node's budget of 0 s is spent before its first candidate,
    # multi-node's 60 s never.
    controller = DisruptionController(env[3].ctx, env[3].terminator, DecisionOptions(
        consolidation=ConsolidationOptions(single_node_timeout=0.0, clock=lambda: 0.0)))
    for name in ("a", "b", "c"):
        add_node(cluster, name, "c.medium", [3000])  # underutilized candidates, none consolidates
    assert controller.reconcile() is None and controller.command is None
    timeouts = {kind: metrics.value("karpenter_voluntary_disruption_consolidation_timeouts_total",
                                    {"consolidation_type": kind}) for kind in ("multi", "single")}
    assert timeouts == {"multi": None, "single": 1}
    env[3].reconcile()  # default budgets (1 min / 3 min) are never reached here
    clock.now += 10
    env[3].reconcile()
    assert metrics.value("karpenter_voluntary_disruption_consolidation_timeouts_total",
                         {"consolidation_type": "single"}) == 1


def test_drift_of_a_static_pool_terminates_first_through_the_controller(env: Any) -> None:
    """Terminate-first drift (capacity-constrained pools): the static pool's only node is drifted and its pods fit
    nowhere else; the controller validates 15 s, then deletes the NodeClaim with no replacement launched (the static
    controller launches the successor), counted as a drift delete."""
    cluster, clock, cloud, controller, metrics = env
    cluster.patch(r.NODEPOOLS, "default", {"spec": {"replicas": 1}})
    add_node(cluster, "n0", "c.medium", [3900])
    cloud.drift["n0-claim"] = "AMIDrift"
    controller.drift_check_period = 0.0
    clock.now += 1
    controller.reconcile()
    command = controller.command
    assert command is not None and command.decision.terminate_first and command.decision.replacements == []
    assert command.decision.detail == {"n0": "AMIDrift, terminate-first: static NodePool at its replicas, the "
                                             "successor launches once the node is gone"}
    clock.now += 15
    controller.reconcile()
    assert is_deleting(cluster.get(r.NODECLAIMS, "n0-claim"))
    assert [name_of(c) for c in cluster.list(r.NODECLAIMS)] == ["n0-claim"]  # nothing launched by disruption
    assert metrics.value("karpenter_voluntary_disruption_decisions_total",
                         {"decision": "delete", "reason": "drifted", "consolidation_type": ""}) == 1
    assert metrics.value("karpenter_nodeclaims_disrupted_total", {
        "reason": "drifted", "nodepool": "default", "capacity_type": "on-demand", "consolidation_policy": "",
        "termination_mode": "graceful"}) == 1


def test_consolidation_labels_its_disruptions_with_the_pool_policy_and_counts_the_pods(env: Any) -> None:
    cluster, clock, _, controller, metrics = env
    for i in range(3):
        add_node(cluster, f"n{i}", "c.medium", [500])
    controller.reconcile()
    clock.now += 15
    controller.reconcile()
    replacement = next(c for c in cluster.list(r.NODECLAIMS) if name_of(c).startswith("default-"))
    set_ready(cluster, name_of(replacement))
    assert controller.reconcile() is not None
    labels = {"reason": "underutilized", "nodepool": "default", "capacity_type": "on-demand",
              "consolidation_policy": "when_empty_or_underutilized", "termination_mode": "graceful"}
    assert metrics.value("karpenter_nodeclaims_disrupted_total", labels) == 3
    assert metrics.value("karpenter_pods_disruption_initiated_total", labels) == 3  # one pod on each node
