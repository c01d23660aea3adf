"""The controller end to end over real HTTP: the emulator as API server, moto as EC2/SSM/IAM/SQS.

Each test starts replicas through the production wiring (``runtime.build_runtime`` + ``runtime.serve``), plays
kube-scheduler and the kubelet where the flow needs them (pods pending, a Node joining), and checks the
exact objects in the emulator and the exact calls and instances in moto.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nodewright.api import labels as L
from nodewright.controllers.nomination import hold_taint, hold_toleration
from nodewright.kube import resources as r
from nodewright.kube.client import KubernetesCluster

from .awsmoto import QUEUE, Account
from .emulator import EmulatorThread
from .harness import (
    CONTROLLER_TOKEN,
    Replica,
    apply_pool,
    chart_rbac_rules,
    condition,
    ec2nodeclass,
    nodepool,
    pending_pod,
    register_node,
    run_pod,
    wait_for,
)


def start(replicas: list[Replica], kube: EmulatorThread, account: Account, identity: str = "a",
          **settings: Any) -> Replica:
    replica = Replica(kube, account, identity, **settings).start()
    replicas.append(replica)
    return replica


def claims(kube: EmulatorThread) -> list[dict[str, Any]]:
    return kube.emulator.snapshot("nodeclaims")


def launched_claim(kube: EmulatorThread) -> dict[str, Any]:
    return wait_for(lambda: next((c for c in claims(kube) if condition(c, L.CONDITION_LAUNCHED) == "True"), None),
                    15, "a launched NodeClaim")


def ready_claim(kube: EmulatorThread, name: str) -> dict[str, Any]:
    return wait_for(lambda: (c := kube.emulator.peek("nodeclaims", name)) and condition(c, L.CONDITION_READY) == "True"
                    and c, 10, f"NodeClaim {name} Ready")


def launch(kube: EmulatorThread, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, pods: int = 2,
           **pool: Any) -> dict[str, Any]:
    apply_pool(custom, **pool)
    for i in range(pods):
        pending_pod(core, f"web-{i}")
    return launched_claim(kube)


def instance_of(account: Account, claim: dict[str, Any]) -> dict[str, Any]:
    instance_id = claim["status"]["providerID"].rsplit("/", 1)[-1]
    return next(i for i in account.instances() if i["InstanceId"] == instance_id)


def pod_names(core: k8s.CoreV1Api) -> list[str]:
    return sorted(p.metadata.name for p in core.list_namespaced_pod("default").items)


# --- provisioning and lifecycle ---------------------------------------------------------------------------


def test_pending_pods_launch_one_nodeclaim_through_create_fleet(kube, account, replicas, core, custom,
                                                                caplog) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    start(replicas, kube, account)
    claim = launch(kube, core, custom)
    time.sleep(0.2)  # further passes must not launch again for the same pods
    assert len(claims(kube)) == 1 and len(account.fleet_requests) == 1
    name = claim["metadata"]["name"]
    assert name.startswith("general-") and claim["metadata"]["finalizers"] == [L.TERMINATION_FINALIZER]
    assert claim["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "pods": "2"}
    zone_of = {subnet: zone for zone, subnet in account.subnets.items()}
    request = account.fleet_requests[0]
    overrides = [(o["InstanceType"], zone_of[o["SubnetId"]]) for cfg in request["LaunchTemplateConfigs"]
                 for o in cfg["Overrides"]]
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]  # most free IPs first
    assert overrides == [(t, z) for t in ("c5.large", "m5.large", "m5.xlarge") for z in zones]  # cheapest first
    assert request["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1, "DefaultTargetCapacityType":
                                                      "on-demand"}
    tags = {s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]} for s in request["TagSpecifications"]}
    assert tags["instance"] == {"Name": f"general/{name}", "eks:eks-cluster-name": "demo",
                                "karpenter.k8s.aws/ec2nodeclass": "default", "karpenter.sh/nodeclaim": name,
                                "karpenter.sh/nodepool": "general", "kubernetes.io/cluster/demo": "owned",
                                "team": "platform"}
    instance = instance_of(account, claim)
    assert instance["InstanceType"] == "c5.large" and instance["SubnetId"] == account.subnets["us-east-1a"]
    assert instance["ImageId"] == account.amis["x86_64"]
    assert {t["Key"]: t["Value"] for t in instance["Tags"]} == tags["instance"]
    labels = claim["metadata"]["labels"]
    assert (labels[L.INSTANCE_TYPE], labels[L.ZONE], labels[L.CAPACITY_TYPE]) == ("c5.large", "us-east-1a",
                                                                                 "on-demand")
    assert claim["status"]["allocatable"]["cpu"] == "1930m"
    messages = [rec.getMessage() for rec in caplog.records]
    assert "Found 2 provisionable pod(s)" in messages
    assert "Computed 1 new node(s) will fit 2 pod(s)" in messages
    assert replicas[0].metric("karpenter_nodeclaims_created_total", {"reason": "provisioned", "nodepool": "general",
                                                                     "min_values_relaxed": "false"}) == 1


def test_registered_node_makes_the_nodeclaim_ready_without_binding(kube, account, replicas, core, custom) -> None:
    replica = start(replicas, kube, account)
    claim = launch(kube, core, custom)
    node_name = register_node(core, claim)
    ready = ready_claim(kube, claim["metadata"]["name"])
    assert [condition(ready, t) for t in ("Launched", "Registered", "Initialized", "Ready")] == ["True"] * 4
    assert ready["status"]["nodeName"] == node_name
    node = kube.emulator.peek("nodes", node_name)
    assert node is not None
    assert node["metadata"]["finalizers"] == [L.TERMINATION_FINALIZER]
    assert node["spec"]["taints"] == []  # karpenter.sh/unregistered removed
    assert node["metadata"]["labels"][L.REGISTERED] == "true" and node["metadata"]["labels"][L.INITIALIZED] == "true"
    assert node["metadata"]["labels"]["team"] == "web"
    assert [(o["kind"], o["name"]) for o in node["metadata"]["ownerReferences"]] == [("NodeClaim",
                                                                                       claim["metadata"]["name"])]
    assert replica.metric("karpenter_nodes_created_total", {"nodepool": "general",
                                                            "zone": "us-east-1a"}) == 1
    time.sleep(0.2)
    assert kube.emulator.bindings == []  # without --bind-pods kube-scheduler binds
    assert [p.spec.node_name for p in core.list_namespaced_pod("default").items] == [None, None]


def test_bind_mode_binds_planned_pods_when_the_node_registers(kube, account, replicas, core, custom) -> None:
    start(replicas, kube, account, bind_pods=True)
    claim = launch(kube, core, custom)
    node_name = register_node(core, claim)
    wait_for(lambda: len(kube.emulator.bindings) == 2, 10, "two bindings")
    assert sorted(kube.emulator.bindings) == [("default", "web-0", node_name), ("default", "web-1", node_name)]
    assert [p.spec.node_name for p in core.list_namespaced_pod("default").items] == [node_name, node_name]
    scheduled = core.read_namespaced_pod("web-0", "default").status.conditions
    assert [(c.type, c.status) for c in scheduled] == [("PodScheduled", "True")]


def test_the_readiness_hold_pins_the_planned_pods_and_is_lifted_once_they_are_bound(kube, account, replicas, core,
                                                                                   custom) -> None:
    """The defaults (issue 25), under the chart's RBAC: the Node registers held
    (``nodewright.io/nominating=<nodeclaim>:NoSchedule``), each planned pod gets that toleration alone, and once the
    pods are bound (kube-scheduler's part, here the test's) the hold is lifted and the NodeClaim turns Ready."""
    kube.emulator.rbac_token = CONTROLLER_TOKEN
    kube.emulator.rbac_rules = chart_rbac_rules()
    start(replicas, kube, account, nomination_hold=True)
    claim = launch(kube, core, custom)
    name = claim["metadata"]["name"]
    node_name = register_node(core, claim)
    taint = hold_taint(name)
    wait_for(lambda: (n := kube.emulator.peek("nodes", node_name)) and taint in (n["spec"].get("taints") or []), 10,
             "the hold's taint")

    def pinned(pod: str) -> bool:
        obj = kube.emulator.peek("pods", pod, "default") or {}
        return hold_toleration(taint) in ((obj.get("spec") or {}).get("tolerations") or [])

    wait_for(lambda: pinned("web-0") and pinned("web-1"), 10, "both planned pods pinned")
    time.sleep(0.3)
    assert condition(kube.emulator.peek("nodeclaims", name), L.CONDITION_INITIALIZED) is None  # held
    for pod in ("web-0", "web-1"):
        core.create_namespaced_pod_binding(pod, "default", {"apiVersion": "v1", "kind": "Binding",
                                                            "metadata": {"name": pod},
                                                            "target": {"kind": "Node", "name": node_name}},
                                           _preload_content=False)
    ready_claim(kube, name)
    node = kube.emulator.peek("nodes", node_name)
    assert node is not None and taint not in (node["spec"].get("taints") or [])
    assert kube.emulator.forbidden == []


def test_startup_taints_hold_initialization_until_removed(kube, account, replicas, core, custom) -> None:
    start(replicas, kube, account)
    agent = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
    claim = launch(kube, core, custom, startupTaints=[agent])
    assert claim["spec"]["startupTaints"] == [agent]
    node_name = register_node(core, claim)
    name = claim["metadata"]["name"]
    wait_for(lambda: condition(kube.emulator.peek("nodeclaims", name), L.CONDITION_REGISTERED) == "True", 10,
             "registration")
    node = kube.emulator.peek("nodes", node_name)
    assert node is not None and node["spec"]["taints"] == [agent]  # added once, at registration
    time.sleep(0.2)
    assert condition(kube.emulator.peek("nodeclaims", name), L.CONDITION_INITIALIZED) is None
    core.patch_node(node_name, {"spec": {"taints": []}})  # the node agent finished
    ready_claim(kube, name)


def test_pods_no_offering_fits_get_a_failed_scheduling_event_and_no_nodeclaim(kube, account, replicas, core,
                                                                              custom) -> None:
    start(replicas, kube, account)
    apply_pool(custom)
    pending_pod(core, "huge", cpu="64")
    event = wait_for(lambda: next((e for e in kube.emulator.snapshot("events", "default")
                                   if e["reason"] == "FailedScheduling"), None), 10, "FailedScheduling")
    assert event["involvedObject"]["name"] == "huge" and event["type"] == "Warning"
    time.sleep(0.2)
    assert claims(kube) == [] and account.fleet_requests == []


# --- termination -------------------------------------------------------------------------------------------


def test_deleting_a_nodeclaim_drains_terminates_and_releases(kube, account, replicas, core, custom) -> None:
    replica = start(replicas, kube, account, bind_pods=True)
    claim = launch(kube, core, custom)
    name = claim["metadata"]["name"]
    node_name = register_node(core, claim)
    wait_for(lambda: len(kube.emulator.bindings) == 2, 10, "two bindings")
    for pod in ("web-0", "web-1"):
        run_pod(core, pod, node_name)
    custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", name)
    wait_for(lambda: kube.emulator.peek("nodeclaims", name) is None, 15, "the NodeClaim to be gone")
    assert kube.emulator.peek("nodes", node_name) is None
    assert sorted(kube.emulator.evictions) == [("default", "web-0"), ("default", "web-1")]
    assert pod_names(core) == []
    assert instance_of(account, claim)["State"]["Name"] in ("shutting-down", "terminated")
    zone = "us-east-1a"  # the cheapest offering's zone with the most free IPs (test_provisioning_flow)
    assert replica.metric("karpenter_nodeclaims_terminated_total", {"nodepool": "general",
                                                                    "capacity_type": "on-demand", "zone": zone}) == 1
    assert replica.metric("karpenter_nodes_terminated_total", {"nodepool": "general", "zone": zone}) == 1


def test_drain_retries_evictions_a_disruption_budget_refuses(kube, account, replicas, core, custom) -> None:
    start(replicas, kube, account, bind_pods=True)
    claim = launch(kube, core, custom)
    node_name = register_node(core, claim)
    wait_for(lambda: len(kube.emulator.bindings) == 2, 10, "two bindings")
    for pod in ("web-0", "web-1"):
        run_pod(core, pod, node_name)
    k8s.PolicyV1Api(core.api_client).create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"])
    wait_for(lambda: kube.emulator.refused_evictions, 10, "a refused eviction")
    assert len(kube.emulator.evictions) == 1 and pod_names(core) != []
    node = kube.emulator.peek("nodes", node_name)
    assert node is not None and {"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    # The workload's replacement comes up elsewhere: the budget allows the second eviction on a retry.
    core.create_node({"metadata": {"name": "other"}})
    core.create_namespaced_pod("default", {"metadata": {"name": "web-new", "labels": {"app": "web"}},
                                           "spec": {"containers": [{"name": "app", "image": "nginx"}]}})
    run_pod(core, "web-new", "other")
    wait_for(lambda: kube.emulator.peek("nodes", node_name) is None, 15, "the node to be released")
    assert pod_names(core) == ["web-new"]
    assert sorted(p for _, p in kube.emulator.evictions) == ["web-0", "web-1"]


def test_do_not_disrupt_blocks_the_drain_until_the_grace_period_forces_it(kube, account, replicas, core,
                                                                          custom) -> None:
    start(replicas, kube, account, bind_pods=True)
    apply_pool(custom, terminationGracePeriod="2s")
    # grace 0: its own grace period fits in the node's at any time, so only the deadline deletes it
    pending_pod(core, "batch", annotations={"karpenter.sh/do-not-disrupt": "true"}, grace=0)
    claim = launched_claim(kube)
    assert claim["spec"]["terminationGracePeriod"] == "2s"
    node_name = register_node(core, claim)
    wait_for(lambda: kube.emulator.bindings, 10, "the binding")
    run_pod(core, "batch", node_name)
    started = time.monotonic()
    custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"])
    wait_for(lambda: any(e["reason"] == "DrainBlocked" for e in kube.emulator.snapshot("events", "default")), 10,
             "a DrainBlocked event")
    assert pod_names(core) == ["batch"]
    wait_for(lambda: kube.emulator.peek("nodes", node_name) is None, 15, "the node to be released")
    assert time.monotonic() - started >= 1.0  # deletionTimestamp has 1 s resolution: more than 1 s of the 2 s
    assert kube.emulator.evictions == [] and pod_names(core) == []  # deleted, never evicted


# --- interruption, garbage collection, status ----------------------------------------------------------------


def test_spot_interruption_from_sqs_cordons_drains_and_replaces_while_draining(kube, account, replicas, core,
                                                                              custom) -> None:
    start(replicas, kube, account, interruption_queue=QUEUE, bind_pods=True)
    claim = launch(kube, core, custom)
    node_name = register_node(core, claim)
    wait_for(lambda: len(kube.emulator.bindings) == 2, 10, "two bindings")
    for pod in ("web-0", "web-1"):
        run_pod(core, pod, node_name)
    # A budget that holds both pods: the drain stalls, so the replacement must come from the provisioner.
    k8s.PolicyV1Api(core.api_client).create_namespaced_pod_disruption_budget("default", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    instance_id = claim["status"]["providerID"].rsplit("/", 1)[-1]
    sqs = account.client("sqs")
    sqs.send_message(QueueUrl=account.queue_url, MessageBody="not an event")
    sqs.send_message(QueueUrl=account.queue_url, MessageBody=json.dumps({
        "version": "0", "id": "e1", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
        "time": "2026-07-20T12:00:00Z", "region": "us-east-1",
        "detail": {"instance-id": instance_id, "instance-action": "terminate"}}))
    name = claim["metadata"]["name"]
    replacement = wait_for(lambda: [c for c in claims(kube) if c["metadata"]["name"] != name
                                    and condition(c, L.CONDITION_LAUNCHED) == "True"], 10, "a replacement")
    assert len(replacement) == 1 and len(account.fleet_requests) == 2
    assert replacement[0]["spec"]["resources"]["requests"]["pods"] == "2"
    old = kube.emulator.peek("nodeclaims", name)
    assert old is not None and old["metadata"].get("deletionTimestamp")  # still draining
    assert condition(old, L.CONDITION_DISRUPTION_REASON) == "True"
    node = kube.emulator.peek("nodes", node_name)
    assert node is not None and {"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    wait_for(lambda: kube.emulator.refused_evictions, 5, "the drain to meet the budget")
    assert kube.emulator.evictions == []  # the budget holds
    attributes = sqs.get_queue_attributes(QueueUrl=account.queue_url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"  # both deleted, none in flight
    assert replicas[0].metric("karpenter_interruption_received_messages_total",
                              {"message_type": "SpotInterruption"}) == 1


def test_garbage_collection_of_leaked_instances_and_vanished_ones(kube, account, replicas, core, custom) -> None:
    replica = start(replicas, kube, account)
    gc = replica.runtime.manager.gc
    gc.grace, gc.period = 0.5, 0.2  # seconds, instead of 30 s each
    claim = launch(kube, core, custom)
    ec2 = account.client("ec2")
    leaked = ec2.run_instances(ImageId=account.amis["x86_64"], InstanceType="m5.large", MinCount=1, MaxCount=1,
                               SubnetId=account.subnets["us-east-1b"], TagSpecifications=[{
                                   "ResourceType": "instance", "Tags": [
                                       {"Key": "kubernetes.io/cluster/demo", "Value": "owned"},
                                       {"Key": "karpenter.sh/nodepool", "Value": "general"},
                                       {"Key": "karpenter.sh/nodeclaim", "Value": "general-gone1"}]}]
                               )["Instances"][0]["InstanceId"]
    wait_for(lambda: next(i for i in account.instances() if i["InstanceId"] == leaked)["State"]["Name"]
             in ("shutting-down", "terminated"), 10, "the leaked instance to be terminated")
    assert instance_of(account, claim)["State"]["Name"] == "running"  # tracked: left alone
    ec2.terminate_instances(InstanceIds=[instance_of(account, claim)["InstanceId"]])
    wait_for(lambda: kube.emulator.peek("nodeclaims", claim["metadata"]["name"]) is None, 10,
             "the NodeClaim of the vanished instance to be deleted")


def test_nodepool_status_reports_a_missing_nodeclass_and_the_cost(kube, account, replicas, core, custom) -> None:
    replica = start(replicas, kube, account)
    replica.runtime.manager.status.period = 0.1  # seconds between status passes
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool())

    def pool() -> dict[str, Any]:
        return kube.emulator.peek("nodepools", "general") or {}

    wait_for(lambda: condition(pool(), "Ready") == "False", 10, "Ready=False")
    reasons = {c["type"]: c["reason"] for c in pool()["status"]["conditions"]}
    assert reasons["NodeClassReady"] == "NodeClassNotFound"
    custom.create_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", ec2nodeclass())
    wait_for(lambda: condition(pool(), "Ready") == "True", 10, "Ready=True")
    for i in range(2):
        pending_pod(core, f"web-{i}")
    launched_claim(kube)
    wait_for(lambda: replica.metric("nodewright_nodepool_cost_per_hour_usd", {"nodepool": "general", "price": "list"}) > 0, 10,
             "the cost metric")
    assert replica.metric("nodewright_nodepool_cost_per_hour_usd", {"nodepool": "general", "price": "list"}) == pytest.approx(0.085)
    wait_for(lambda: (pool().get("status") or {}).get("resources", {}).get("nodes") == "1", 10, "status.resources")
    assert pool()["status"]["resources"]["cpu"] == "2"


# --- leader election -----------------------------------------------------------------------------------------


def test_only_the_leader_acts_and_the_standby_takes_over_at_once_on_graceful_stop(kube, account, replicas, core,
                                                                                   custom) -> None:
    lease = {"lease_duration": 5.0, "renew_deadline": 3.0, "retry_period": 0.25}  # seconds
    a = start(replicas, kube, account, "a", **lease)
    wait_for(lambda: a.is_leader, 5, "a to lead")
    b = start(replicas, kube, account, "b", **lease)
    claim = launch(kube, core, custom)
    time.sleep(0.2)
    assert not b.is_leader and len(claims(kube)) == 1 and len(account.fleet_requests) == 1
    assert b.metric("karpenter_nodeclaims_created_total", {"reason": "provisioned", "nodepool": "general",
                                                           "min_values_relaxed": "false"}) == 0
    stopped = time.monotonic()
    a.stop()
    wait_for(lambda: b.is_leader, 5, "b to take over")
    assert time.monotonic() - stopped < 3.0  # a released the Lease: no waiting out its 5 s
    register_node(core, claim)  # b finishes what a started
    ready_claim(kube, claim["metadata"]["name"])
    lease = kube.emulator.peek("leases", "nodewright-leader-election", "kube-system")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1


def test_a_crashed_leader_is_replaced_after_the_lease_expires(kube, account, replicas, core, custom) -> None:
    lease = {"lease_duration": 1.0, "renew_deadline": 0.7, "retry_period": 0.1}  # seconds
    a = start(replicas, kube, account, "a", **lease)
    wait_for(lambda: a.is_leader, 5, "a to lead")
    b = start(replicas, kube, account, "b", **lease)
    crashed = time.monotonic()
    a.stop(release=False)
    wait_for(lambda: b.is_leader, 8, "b to take over")
    took = time.monotonic() - crashed
    assert 0.8 <= took < 4.0  # the 1 s lease had to expire by b's own clock
    launch(kube, core, custom)
    assert len(claims(kube)) == 1


# --- watch failures ----------------------------------------------------------------------------------------


def _pods_informer(replica: Replica) -> Any:
    cluster = replica.runtime.cluster
    assert isinstance(cluster, KubernetesCluster)
    return cluster.informers[r.PODS]


def test_watch_broken_mid_stream_resumes_without_losing_or_duplicating_work(kube, account, replicas, core,
                                                                            custom) -> None:
    replica = start(replicas, kube, account)
    apply_pool(custom)
    informer = _pods_informer(replica)
    watched = len(replica.runtime.cluster.informers)  # type: ignore[attr-defined]
    assert watched >= 9
    wait_for(lambda: kube.emulator.live_watches() >= watched, 5, "every informer's watch")
    assert kube.break_watches() >= watched
    for i in range(3):
        pending_pod(core, f"web-{i}")
    claim = launched_claim(kube)
    time.sleep(0.2)
    assert len(claims(kube)) == 1 and len(account.fleet_requests) == 1
    assert claim["spec"]["resources"]["requests"]["pods"] == "3"
    assert informer.stats["lists"] == 1 and informer.stats["errors"] >= 1 and informer.stats["watches"] >= 2
    assert sorted(p["metadata"]["name"] for p in informer.items()) == ["web-0", "web-1", "web-2"]


def test_410_gone_relists_and_forgets_what_was_deleted_meanwhile(kube, account, replicas, core, custom) -> None:
    replica = start(replicas, kube, account)
    apply_pool(custom)
    informer = _pods_informer(replica)
    core.create_namespaced_pod("default", {"metadata": {"name": "doomed", "labels": {"app": "x"}},
                                           "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n0"}})
    wait_for(lambda: informer.get("default/doomed"), 5, "the pod in the cache")
    # One step on the emulator's loop: drop the watch, delete the pod, then compact the history past the delete.
    kube.call(lambda: (kube.emulator.break_watches("pods"), kube.emulator.delete_object("pods", "doomed", "default"),
                       kube.emulator.compact()))
    for i in range(2):
        pending_pod(core, f"web-{i}")
    claim = launched_claim(kube)
    time.sleep(0.2)
    assert informer.stats["gone"] >= 1 and informer.stats["lists"] >= 2
    assert informer.get("default/doomed") is None
    assert len(claims(kube)) == 1 and len(account.fleet_requests) == 1
    assert claim["spec"]["resources"]["requests"]["pods"] == "2"
    with pytest.raises(ApiException):
        core.read_namespaced_pod("doomed", "default")


# --- what a real API server showed (issue 16) -------------------------------------------------------------------


def steps_pass(replica: Replica, count: int, what: str) -> None:
    """Wait until the leader ran ``count`` more controller passes (no wall-clock assumption)."""
    target = replica.runtime.steps + count
    wait_for(lambda: replica.runtime.steps >= target, 20, what)


def test_drain_waits_for_evicted_pods_to_terminate_before_terminating_the_instance(kube, account, replicas, core,
                                                                                   custom) -> None:
    kube.emulator.pod_grace_scale = None  # pods run out their grace period only when the test says
    replica = start(replicas, kube, account, bind_pods=True)
    apply_pool(custom)
    pending_pod(core, "web-0", grace=120)
    claim = launched_claim(kube)
    name = claim["metadata"]["name"]
    node_name = register_node(core, claim)
    wait_for(lambda: kube.emulator.bindings, 10, "the binding")
    run_pod(core, "web-0", node_name)
    custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", name)
    wait_for(lambda: kube.emulator.evictions, 10, "the eviction")
    assert kube.emulator.terminating_pods() == [("default", "web-0")]
    steps_pass(replica, 20, "twenty passes while the pod terminates")
    # Still inside its 120 s grace period: the instance runs, the Node stays, cordoned.
    assert instance_of(account, claim)["State"]["Name"] == "running"
    node = kube.emulator.peek("nodes", node_name)
    assert node is not None and {"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    assert kube.emulator.peek("nodeclaims", name) is not None
    assert kube.finish_pod("default", "web-0")  # the kubelet saw the containers exit
    wait_for(lambda: kube.emulator.peek("nodeclaims", name) is None, 15, "the NodeClaim to be gone")
    assert kube.emulator.peek("nodes", node_name) is None
    assert instance_of(account, claim)["State"]["Name"] in ("shutting-down", "terminated")


def test_drain_stops_waiting_at_the_nodeclaims_termination_grace_period(kube, account, replicas, core,
                                                                        custom) -> None:
    kube.emulator.pod_grace_scale = None  # the pod would terminate forever
    start(replicas, kube, account, bind_pods=True)
    apply_pool(custom, terminationGracePeriod="2s")
    pending_pod(core, "web-0", grace=1)
    claim = launched_claim(kube)
    node_name = register_node(core, claim)
    wait_for(lambda: kube.emulator.bindings, 10, "the binding")
    run_pod(core, "web-0", node_name)
    custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"])
    wait_for(lambda: kube.emulator.peek("nodes", node_name) is None, 15, "the node to be released")
    assert instance_of(account, claim)["State"]["Name"] in ("shutting-down", "terminated")


@pytest.mark.timeout(60)
def test_bind_403_names_controller_bind_pods_then_binds_on_a_retry_and_the_node_is_not_empty(
        kube, account, replicas, core, custom, caplog) -> None:
    caplog.set_level(logging.INFO, logger="nodewright.controllers")
    kube.emulator.rbac_token = CONTROLLER_TOKEN
    kube.emulator.rbac_rules = chart_rbac_rules(("", "pods/binding"))  # installed without controller.bindPods
    replica = start(replicas, kube, account, bind_pods=True)
    disruption = replica.runtime.manager.disruption
    disruption.poll_period, disruption.validation_delay = 0.1, 0.2  # decide emptiness within a few passes
    claim = launch(kube, core, custom, pods=1)  # WhenEmptyOrUnderutilized after 0s: empty nodes go at once
    name = claim["metadata"]["name"]
    register_node(core, claim)
    event = wait_for(lambda: next((e for e in kube.emulator.snapshot("events", "default")
                                   if e["reason"] == "FailedBinding"), None), 10, "a FailedBinding event")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "web-0"
    assert "controller.bindPods=true" in event["message"] and "pods/binding" in event["message"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "pods/binding" in r.getMessage()]
    assert len(errors) == 1 and "controller.bindPods=true" in errors[0]
    ready_claim(kube, name)
    steps_pass(replica, 30, "thirty passes with the pod nominated, unbound")
    # The bind kept failing, with backoff, and the node waiting for its pod was not deleted as empty.
    refused = kube.emulator.forbidden.count(("create", "pods/binding", ""))
    assert 1 <= refused <= 5
    assert not kube.emulator.peek("nodeclaims", name)["metadata"].get("deletionTimestamp")
    assert len(claims(kube)) == 1
    kube.emulator.rbac_rules = chart_rbac_rules()  # the chart upgraded with controller.bindPods=true
    wait_for(lambda: kube.emulator.bindings, 40, "the retried binding")
    assert [e["reason"] for e in kube.emulator.snapshot("events", "default")].count("FailedBinding") == 1


def test_owner_references_enforcement_passes_with_the_charts_rbac(kube, account, replicas, core, custom) -> None:
    kube.emulator.owner_references_enforcement = True
    kube.emulator.rbac_token = CONTROLLER_TOKEN
    kube.emulator.rbac_rules = chart_rbac_rules()
    start(replicas, kube, account)
    claim = launch(kube, core, custom)
    node_name = register_node(core, claim)
    ready_claim(kube, claim["metadata"]["name"])
    node = kube.emulator.peek("nodes", node_name)
    assert [(o["kind"], o["blockOwnerDeletion"]) for o in node["metadata"]["ownerReferences"]] == [("NodeClaim", True)]
    assert [(o["kind"], o["blockOwnerDeletion"]) for o in claim["metadata"]["ownerReferences"]] == [("NodePool", True)]
    assert kube.emulator.forbidden == []


def test_owner_references_enforcement_refuses_without_finalizers_update(kube, account, replicas, core,
                                                                        custom) -> None:
    kube.emulator.owner_references_enforcement = True
    kube.emulator.rbac_token = CONTROLLER_TOKEN
    kube.emulator.rbac_rules = chart_rbac_rules(("karpenter.sh", "nodepools/finalizers"),
                                                ("karpenter.sh", "nodeclaims/finalizers"))
    start(replicas, kube, account)
    apply_pool(custom)
    pending_pod(core, "web-0")
    wait_for(lambda: kube.emulator.forbidden, 10, "a refused NodeClaim create")
    assert kube.emulator.forbidden[0] == ("update", "nodepools/finalizers", "karpenter.sh")
    assert claims(kube) == []


def test_drifted_condition_is_set_when_the_nodepool_changes_and_cleared_when_it_changes_back(
        kube, account, replicas, core, custom) -> None:
    start(replicas, kube, account)
    claim = launch(kube, core, custom)
    name = claim["metadata"]["name"]
    register_node(core, claim)
    ready_claim(kube, name)
    assert condition(kube.emulator.peek("nodeclaims", name), L.CONDITION_DRIFTED) is None
    patch = {"spec": {"template": {"metadata": {"labels": {"team": "data"}}}}}
    custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "general", patch)
    drifted = wait_for(lambda: (c := kube.emulator.peek("nodeclaims", name))
                       and condition(c, L.CONDITION_DRIFTED) == "True" and c, 10, "Drifted=True")
    cond = next(c for c in drifted["status"]["conditions"] if c["type"] == L.CONDITION_DRIFTED)
    assert cond["reason"] == "NodePoolDrifted"
    patch = {"spec": {"template": {"metadata": {"labels": {"team": "web"}}}}}
    custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "general", patch)
    wait_for(lambda: condition(kube.emulator.peek("nodeclaims", name), L.CONDITION_DRIFTED) is None, 10,
             "the Drifted condition to be removed")
