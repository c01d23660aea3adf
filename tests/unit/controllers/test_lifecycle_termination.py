"""NodeClaim lifecycle, termination/drain, interruption, garbage collection, NodePool status."""

from __future__ import annotations

import json
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.aws.interruption import parse_event
from nodewright.cloud.provider import InsufficientCapacityError, LaunchError
from nodewright.controllers.garbagecollection import GarbageCollector
from nodewright.controllers.interruption import InterruptionController, InterruptionMessage
from nodewright.controllers.lifecycle import LifecycleController
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.controllers.nodepool_status import NodePoolStatusController
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.controllers.termination import TerminationController
from nodewright.kube import resources as r
from nodewright.kube.objects import condition_true, name_of
from nodewright.pricing import parse_pricing_policy

from .conftest import node_for, pending_pod
from .fakes import first_fit_solver

NODE = "ip-10-0-0-1.ec2.internal"
ZONE = "us-east-1a"  # the fake cloud launches in the cheapest offering's zone, listed first


def planned_claim(ctx, cluster, clock, pods: int = 1) -> None:
    """Pending pods, then the provisioner's batch closes and creates their NodeClaim (not launched yet)."""
    for i in range(pods):
        cluster.create(r.PODS, pending_pod(f"web-{i}"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()


def launched_claim(ctx, cluster, clock, pods: int = 2):
    planned_claim(ctx, cluster, clock, pods)
    LifecycleController(ctx).reconcile()
    return cluster.list(r.NODECLAIMS)[0]


def ready_node(ctx, cluster, clock):
    claim = launched_claim(ctx, cluster, clock)
    cluster.create(r.NODES, node_for(claim))
    LifecycleController(ctx).reconcile()
    for i in range(2):
        cluster.patch(r.PODS, f"web-{i}", {"spec": {"nodeName": NODE}, "status": {"phase": "Running"}}, "default")
    return cluster.get(r.NODECLAIMS, name_of(claim))


def test_launch_records_provider_facts(ctx, cluster, clock, cloud) -> None:
    claim = launched_claim(ctx, cluster, clock)
    assert claim["status"]["providerID"] == "aws:///us-east-1a/i-00000000000000001"
    assert claim["status"]["capacity"] == {"cpu": "2", "memory": "4194304Ki", "pods": "29"}
    assert claim["metadata"]["labels"][L.INSTANCE_TYPE] == "c5.large"
    assert claim["metadata"]["labels"][L.CAPACITY_TYPE] == "on-demand"
    assert condition_true(claim, L.CONDITION_LAUNCHED)
    assert not condition_true(claim, L.CONDITION_REGISTERED)


def test_registration_and_initialization(ctx, cluster, clock) -> None:
    claim = ready_node(ctx, cluster, clock)
    node = cluster.get(r.NODES, NODE)
    assert node["metadata"]["finalizers"] == [L.TERMINATION_FINALIZER]
    assert node["metadata"]["labels"][L.NODEPOOL] == "general"
    assert node["metadata"]["labels"][L.REGISTERED] == "true"
    assert node["metadata"]["labels"][L.INITIALIZED] == "true"
    assert node["metadata"]["labels"]["team"] == "web"
    assert node["spec"]["taints"] == []
    assert node["metadata"]["ownerReferences"][0]["name"] == name_of(claim)
    assert claim["status"]["nodeName"] == NODE
    for cond in (L.CONDITION_REGISTERED, L.CONDITION_INITIALIZED, L.CONDITION_READY):
        assert condition_true(claim, cond), cond
    assert ctx.metrics.value("karpenter_nodes_created_total", {"nodepool": "general", "zone": ZONE}) == 1.0


def test_not_ready_node_is_registered_but_not_initialized(ctx, cluster, clock) -> None:
    claim = launched_claim(ctx, cluster, clock)
    cluster.create(r.NODES, node_for(claim, ready=False))
    LifecycleController(ctx).reconcile()
    claim = cluster.get(r.NODECLAIMS, name_of(claim))
    assert condition_true(claim, L.CONDITION_REGISTERED)
    assert not condition_true(claim, L.CONDITION_INITIALIZED)


def test_insufficient_capacity_deletes_the_nodeclaim(ctx, cluster, clock, cloud) -> None:
    cloud.create_errors.append(InsufficientCapacityError("no c5.large in us-east-1a"))
    cluster.create(r.PODS, pending_pod("web-0"))
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    LifecycleController(ctx).reconcile()
    TerminationController(ctx).reconcile()
    assert cluster.list(r.NODECLAIMS) == []
    assert [e["reason"] for e in cluster.events if e["kind"] == "NodeClaim"] == ["InsufficientCapacityError", "Terminated"]


def test_transient_cloud_error_sets_launched_false_backs_off_and_launches_on_the_retry(ctx, cluster, clock,
                                                                                      cloud) -> None:
    """Issue 32 item 4: a read timeout (TransientCloudError, from a botocore error) is retried with the shared
    backoff, with a LaunchFailed event and Launched=False naming it; no traceback, no second instance."""
    from nodewright.cloud.provider import TransientCloudError

    cloud.create_errors.append(TransientCloudError("Create failed: ReadTimeoutError: Read timeout on endpoint URL"))
    planned_claim(ctx, cluster, clock)
    lifecycle = LifecycleController(ctx)
    lifecycle.reconcile()
    (claim,) = cluster.list(r.NODECLAIMS)
    launched = next(c for c in claim["status"]["conditions"] if c["type"] == L.CONDITION_LAUNCHED)
    assert (launched["status"], launched["reason"]) == ("False", "TransientCloudError")
    assert [e["reason"] for e in cluster.events if e["kind"] == "NodeClaim"] == ["LaunchFailed"]
    assert lifecycle.backoff.delay(name_of(claim)) == 2.0
    lifecycle.reconcile()  # backing off: no call
    clock.advance(2.0)
    lifecycle.reconcile()
    assert condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_LAUNCHED)
    assert len(cloud.list()) == 1


def test_launch_liveness_deletes_after_five_minutes(ctx, cluster, clock, cloud) -> None:
    cloud.create_errors.extend(LaunchError("InvalidParameter") for _ in range(100))
    planned_claim(ctx, cluster, clock)
    life, term = LifecycleController(ctx), TerminationController(ctx)
    for _ in range(30):  # 30 x 9.9 s = 297 s
        clock.advance(9.9)
        life.reconcile()
    assert len(cluster.list(r.NODECLAIMS)) == 1
    clock.advance(5)
    life.reconcile()
    term.reconcile()
    assert cluster.list(r.NODECLAIMS) == []


def test_registration_liveness_deletes_claim_and_instance(ctx, cluster, clock, cloud) -> None:
    launched_claim(ctx, cluster, clock)
    life, term = LifecycleController(ctx), TerminationController(ctx)
    clock.advance(899)
    life.reconcile()
    assert len(cluster.list(r.NODECLAIMS)) == 1
    clock.advance(2)
    life.reconcile()
    term.reconcile()
    assert cluster.list(r.NODECLAIMS) == []
    assert cloud.instances == {} and cloud.deleted == ["i-00000000000000001"]


def test_termination_drains_respects_pdb_and_releases_finalizers(ctx, cluster, clock, cloud) -> None:
    claim = ready_node(ctx, cluster, clock)
    cluster.create(r.PDBS, {"metadata": {"name": "web", "namespace": "default"},
                            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    ds = pending_pod("fluentbit-1", ownerReferences=[{"kind": "DaemonSet", "name": "fluentbit"}])
    ds["spec"]["nodeName"] = NODE
    ds["metadata"]["labels"] = {"app": "fluentbit"}
    cluster.create(r.PODS, ds)
    cluster.delete(r.NODECLAIMS, name_of(claim))
    term = TerminationController(ctx)
    term.reconcile()  # deletes the node
    term.reconcile()  # taints + tries to evict: the PDB forbids it
    node = cluster.get(r.NODES, NODE)
    assert {"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    assert cluster.evictions == []
    assert cluster.get(r.PODS, "web-0", "default") is not None
    cluster.delete(r.PDBS, "web", "default")
    term.reconcile()  # still backing off (1 s)
    assert cluster.evictions == []
    clock.advance(1.5)
    term.reconcile()
    assert sorted(cluster.evictions) == [("default", "web-0"), ("default", "web-1")]
    term.reconcile()  # node: terminate instance, release finalizer (daemonset pod left to the pod GC)
    term.reconcile()  # nodeclaim: instance gone -> release
    assert cluster.get(r.NODES, NODE) is None
    assert cluster.list(r.NODECLAIMS) == []
    assert cloud.instances == {}
    assert ctx.metrics.value("karpenter_nodeclaims_terminated_total",
                             {"nodepool": "general", "capacity_type": "on-demand", "zone": ZONE}) == 1.0
    assert ctx.metrics.value("karpenter_nodes_terminated_total", {"nodepool": "general", "zone": ZONE}) == 1.0
    assert ctx.metrics.value("karpenter_nodes_drained_total", {"nodepool": "general"}) == 1.0
    assert ctx.metrics.value("karpenter_pods_eviction_requests_total", {"code": "200"}) == 2.0
    assert ctx.metrics.value("karpenter_pods_drained_total", {"reason": ""}) == 2.0  # deleted by hand
    assert ctx.metrics.value("karpenter_nodes_lifetime_duration_seconds_count", {"nodepool": "general"}) == 1.0
    assert ctx.metrics.value("karpenter_nodeclaims_termination_duration_seconds_count",
                             {"nodepool": "general"}) == 1.0


def test_do_not_disrupt_blocks_until_termination_grace_period(ctx, cluster, clock, cloud) -> None:
    claim = ready_node(ctx, cluster, clock)
    cluster.patch(r.PODS, "web-1", {"metadata": {"annotations": {L.DO_NOT_DISRUPT: "true"}}}, "default")
    cluster.delete(r.NODECLAIMS, name_of(claim))
    term = TerminationController(ctx)
    for _ in range(3):
        term.reconcile()
    assert cluster.evictions == [("default", "web-0")]
    assert cluster.get(r.PODS, "web-1", "default") is not None
    assert cluster.get(r.NODES, NODE) is not None
    clock.advance(600)  # the NodePool's terminationGracePeriod: 10m
    for _ in range(3):
        term.reconcile()
    assert cluster.get(r.PODS, "web-1", "default") is None
    assert cluster.get(r.NODES, NODE) is None and cluster.list(r.NODECLAIMS) == []


def test_node_with_finalizer_but_no_nodeclaim_is_released(ctx, cluster) -> None:
    cluster.create(r.NODES, {"metadata": {"name": "orphan", "finalizers": [L.TERMINATION_FINALIZER]},
                             "spec": {}, "status": {}})
    cluster.delete(r.NODES, "orphan")
    TerminationController(ctx).reconcile()
    assert cluster.get(r.NODES, "orphan") is None


class ListSource:
    def __init__(self, messages):
        self.messages = list(messages)
        self.deleted = []

    def receive(self):
        out, self.messages = self.messages, []
        return out

    def delete(self, message):
        self.deleted.append(message)


def test_spot_interruption_cordons_drains_and_replaces(ctx, cluster, clock, cloud) -> None:
    claim = ready_node(ctx, cluster, clock)
    body = {"source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
            "detail": {"instance-id": "i-00000000000000001", "instance-action": "terminate"}}
    message = parse_event(json.dumps(body))
    assert message == InterruptionMessage("SpotInterruption", ("i-00000000000000001",), "CordonAndDrain",
                                          detail="terminate")
    rebalance = InterruptionMessage("RebalanceRecommendation", ("i-00000000000000001",), "EventOnly")
    source = ListSource([message, rebalance])
    assert InterruptionController(ctx, source).reconcile() == 1
    assert len(source.deleted) == 2
    node = cluster.get(r.NODES, NODE)
    assert {"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    assert cluster.get(r.NODECLAIMS, name_of(claim))["metadata"].get("deletionTimestamp")
    # The replacement is provisioned while the node drains: its pods are planned again.
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=first_fit_solver)
    prov.reconcile()
    clock.advance(1.0)
    result = prov.reconcile()
    assert result is not None and [p.key for p in result.new_nodeclaims[0].pods] == ["default/web-0", "default/web-1"]
    assert len(cluster.list(r.NODECLAIMS)) == 2


def test_garbage_collection(ctx, cluster, clock, cloud) -> None:
    claim = launched_claim(ctx, cluster, clock)
    leaked = cloud.create(__import__("nodewright.api.manifests", fromlist=["x"]).parse_nodeclaim(
        {**claim, "metadata": {"name": "leaked", "labels": {L.NODEPOOL: "general"}}}))
    gc = GarbageCollector(ctx, grace=30.0)
    gc.reconcile(force=True)
    assert gc.terminated == []  # younger than 30 s
    clock.advance(31)
    gc.reconcile(force=True)
    assert gc.terminated == [leaked.status.provider_id]
    cloud.instances.clear()  # the claim's own instance vanished
    gc.reconcile(force=True)
    assert cluster.get(r.NODECLAIMS, name_of(claim))["metadata"].get("deletionTimestamp")


def test_garbage_collection_spares_an_instance_whose_nodeclaim_has_not_recorded_the_launch(ctx, cluster, clock,
                                                                                           cloud) -> None:
    """Found by the fault campaign (issue 32): the launch succeeded but writing status.providerID kept failing (or
    the leader died after CreateFleet); GC must not terminate the instance, or the retry launches a second one."""
    from nodewright.api.manifests import parse_nodeclaim

    planned_claim(ctx, cluster, clock)
    (claim,) = cluster.list(r.NODECLAIMS)
    cloud.create(parse_nodeclaim(claim))  # launched; the NodeClaim never heard of it
    gc = GarbageCollector(ctx, grace=30.0)
    clock.advance(120)
    gc.reconcile(force=True)
    assert gc.terminated == []
    LifecycleController(ctx).reconcile()  # the retry adopts the instance instead of launching again
    assert condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_LAUNCHED)
    cluster.delete(r.NODECLAIMS, name_of(claim))
    cluster.patch(r.NODECLAIMS, name_of(claim), {"metadata": {"finalizers": []}})  # gone without terminating
    gc.reconcile(force=True)
    assert len(gc.terminated) == 1  # now it is a leak


def test_nodepool_status_cost_and_missing_nodeclass(ctx, cluster, clock) -> None:
    ready_node(ctx, cluster, clock)
    status = NodePoolStatusController(ctx)
    costs = status.reconcile(force=True)
    assert costs == {"general": 0.085}
    pool = cluster.get(r.NODEPOOLS, "general")
    assert pool["status"]["resources"] == {"cpu": "2", "memory": "4Gi", "pods": "29", "nodes": "1"}
    assert condition_true(pool, "Ready")
    assert ctx.metrics.value("nodewright_nodepool_cost_per_hour_usd", {"nodepool": "general", "price": "list"}) == 0.085
    assert ctx.metrics.value("nodewright_nodepool_cost_per_hour_usd",
                             {"nodepool": "general", "price": "effective"}) is None  # no policy: no such series
    assert ctx.metrics.value("karpenter_nodepools_usage", {"nodepool": "general", "resource_type": "cpu"}) == 2.0
    assert ctx.metrics.value("karpenter_nodepools_limit", {"nodepool": "general", "resource_type": "cpu"}) == 100.0
    cluster.delete(r.EC2NODECLASSES, "default")
    status.reconcile(force=True)
    ready = next(c for c in cluster.get(r.NODEPOOLS, "general")["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NodeClassNotFound")


def _policy(spec: dict) -> Any:
    return parse_pricing_policy({"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy", "spec": spec})


def test_nodepool_cost_by_list_and_effective_price_follows_the_policy(ctx, cluster, clock) -> None:
    """One on-demand c5.large ($0.085/h list). A 10% c5 discount: $0.0765/h effective. A regional RI for it whose
    amortised cost is $0.05/h: the pool pays the RI's $0.05/h. The policy withdrawn: the effective series goes,
    the list series stays."""
    ready_node(ctx, cluster, clock)
    policies = iter([_policy({"discounts": [{"match": {"family": "c5"}, "percent": 10}]}),
                     _policy({"reservedInstances": [{"instanceType": "c5.large", "region": "us-east-1", "count": 1,
                                                     "usdPerHour": 0.05}]}),
                     None])
    current: list[Any] = [next(policies)]
    status = NodePoolStatusController(ctx, pricing_policy=lambda: current[0])

    def cost(price: str) -> float | None:
        return ctx.metrics.value("nodewright_nodepool_cost_per_hour_usd", {"nodepool": "general", "price": price})

    status.reconcile(force=True)
    assert (cost("list"), cost("effective")) == (0.085, 0.0765)
    current[0] = next(policies)
    status.reconcile(force=True)
    assert (cost("list"), cost("effective")) == (0.085, 0.05)
    current[0] = next(policies)
    status.reconcile(force=True)
    assert (cost("list"), cost("effective")) == (0.085, None)
    assert ctx.metrics.value("karpenter_nodepools_cost_total", {"nodepool": "general"}) == 0.085


def test_effective_cost_is_the_pools_share_of_the_whole_fleets_bill(ctx, cluster, clock) -> None:
    """The pool's c5.large and an unmanaged c5.large Node (no NodePool) in the same zone share one regional RI
    ($0.05/h amortised): identical instances split their line, (0.05 + 0.085) / 2 = $0.0675/h each."""
    claim = ready_node(ctx, cluster, clock)
    labels = {L.INSTANCE_TYPE: "c5.large", L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "on-demand"}
    assert {k: claim["metadata"]["labels"][k] for k in labels} == labels
    cluster.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "byo", "labels": labels}})
    policy = _policy({"reservedInstances": [{"instanceType": "c5.large", "region": "us-east-1", "count": 1,
                                             "usdPerHour": 0.05}]})
    status = NodePoolStatusController(ctx, pricing_policy=lambda: policy)
    assert status.reconcile(force=True) == {"general": 0.085}
    assert status.effective_costs == {"general": 0.0675}


def test_manager_full_cycle(ctx, cluster, clock, cloud) -> None:
    mgr = ControllerManager(ctx, ControllerOptions())
    mgr.provisioner.solver = first_fit_solver
    cluster.create(r.PODS, pending_pod("web-0"))
    mgr.step()
    clock.advance(1.0)
    mgr.step()
    claim = cluster.list(r.NODECLAIMS)[0]
    assert condition_true(claim, L.CONDITION_LAUNCHED)
    cluster.create(r.NODES, node_for(claim))
    mgr.step()
    # The readiness hold (on by default) holds the Node while its planned pod is pending; the pod is deleted, so
    # nothing is left to wait for (and the Node stays empty).
    assert not condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_READY)
    cluster.delete(r.PODS, "web-0", "default")
    mgr.step()
    assert condition_true(cluster.get(r.NODECLAIMS, name_of(claim)), L.CONDITION_READY)
    assert mgr.terminator.delete_nodeclaim(name_of(claim), "Empty")
    for _ in range(3):
        mgr.step()
    assert cluster.list(r.NODECLAIMS) == [] and cluster.list(r.NODES) == [] and cloud.instances == {}
    assert ctx.metrics.value("karpenter_nodeclaims_disrupted_total",
                             {"reason": "empty", "nodepool": "general", "capacity_type": "on-demand",
                              "consolidation_policy": "", "termination_mode": "eventual"}) == 1.0  # the pool's TGP


def test_pods_drained_are_counted_with_the_nodeclaims_disruption_reason(ctx, cluster, clock) -> None:
    claim = ready_node(ctx, cluster, clock)
    term = TerminationController(ctx)
    assert term.terminator.delete_nodeclaim(name_of(claim), "Underutilized", "Consolidating")
    term.reconcile()  # deletes the node
    term.reconcile()  # taints and evicts web-0 and web-1
    assert sorted(cluster.evictions) == [("default", "web-0"), ("default", "web-1")]
    assert ctx.metrics.value("karpenter_pods_drained_total", {"reason": "Underutilized"}) == 2.0
    assert ctx.metrics.value("karpenter_pods_drained_total", {"reason": ""}) is None


def test_instance_termination_duration_is_from_the_first_terminate_call_until_gone(ctx, cluster, clock,
                                                                                     cloud) -> None:
    claim = ready_node(ctx, cluster, clock)
    real_delete = cloud.delete
    cloud.delete = lambda nodeclaim: None  # EC2 accepted: the instance is shutting down, still listed
    cluster.delete(r.NODECLAIMS, name_of(claim))
    term = TerminationController(ctx)
    for _ in range(4):  # node deleted, drained, its pods gone: the instance termination is requested
        term.reconcile()
        for pod in cluster.list(r.PODS):
            cluster.delete(r.PODS, name_of(pod), "default")
    assert cluster.get(r.NODECLAIMS, name_of(claim)) is not None
    clock.advance(20.0)
    cloud.delete = real_delete  # now it is gone
    term.reconcile()
    term.reconcile()
    assert cluster.get(r.NODECLAIMS, name_of(claim)) is None
    labels = {"nodepool": "general"}
    assert ctx.metrics.value("karpenter_nodeclaims_instance_termination_duration_seconds_count", labels) == 1
    assert ctx.metrics.value("karpenter_nodeclaims_instance_termination_duration_seconds_sum", labels) == 20.0


def test_a_disruption_counts_the_nodeclaim_and_its_reschedulable_pods_with_policy_and_mode(ctx, cluster,
                                                                                           clock) -> None:
    """Karpenter main (#3015, #3179): karpenter_nodeclaims_disrupted_total once and
    karpenter_pods_disruption_initiated_total by the node's reschedulable pods (web-0, web-1; a DaemonSet pod is
    not counted), both with the snake_cased reason, the consolidation policy and the termination mode."""
    claim = ready_node(ctx, cluster, clock)
    daemon = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "agent-x", "namespace": "default", "ownerReferences": [{"kind": "DaemonSet", "name": "agent",
                                                                         "apiVersion": "apps/v1", "uid": "d1"}]},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Running"}}
    cluster.create(r.PODS, daemon)
    cluster.patch(r.NODECLAIMS, name_of(claim), {"spec": {"terminationGracePeriod": "0s"}})
    term = TerminationController(ctx)
    assert term.terminator.delete_nodeclaim(name_of(claim), "Underutilized", "Consolidating",
                                            consolidation_policy="WhenEmptyOrUnderutilized")
    labels = {"reason": "underutilized", "nodepool": "general", "capacity_type": "on-demand",
              "consolidation_policy": "when_empty_or_underutilized", "termination_mode": "forceful"}
    assert ctx.metrics.value("karpenter_nodeclaims_disrupted_total", labels) == 1.0
    assert ctx.metrics.value("karpenter_pods_disruption_initiated_total", labels) == 2.0


def test_termination_mode_follows_the_termination_grace_period() -> None:
    from nodewright.controllers.common import snake_case, termination_mode

    assert [termination_mode({"spec": spec}) for spec in ({}, {"terminationGracePeriod": "30m"},
                                                          {"terminationGracePeriod": "0s"})] == [
        "graceful", "eventual", "forceful"]
    assert snake_case("WhenEmptyOrUnderutilized") == "when_empty_or_underutilized" and snake_case("") == ""
