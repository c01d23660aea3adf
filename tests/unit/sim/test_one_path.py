"""One cluster model: ``simulate -f``, a scenario replay's first batch and the controller's provisioner read the
same manifests the same way and create identical NodeClaims.

The manifests are the issue's cases: 30 tiny pods on a t3.medium-only NodePool whose EC2NodeClass sets kubelet
``maxPods: 110`` (without it a t3.medium holds 17 pods, so two nodes); a NodePool whose ``limits`` are already
taken by the Node it owns; a Node being deleted whose pod must be placed again.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from nodewright.api import labels as L
from nodewright.api.manifests import parse_documents
from nodewright.cloud.catalog import region_zones
from nodewright.cloud.simulated import LatencyDistribution, SimulatedCloudProvider, SimulatedEC2
from nodewright.controllers.common import Context
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj
from nodewright.metrics import Metrics
from nodewright.sim.decision import decide_in_cluster, load_cluster
from nodewright.sim.drivers import NodewrightDriver
from nodewright.sim.scenario import parse_scenario
from nodewright.sim.world import World

REGION = "us-east-1"
NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "dense"},
             "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "node-role",
                      "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                      "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                      "kubelet": {"maxPods": 110}}}


def _nodepool(name: str, requirements: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"pool": name}},
                                  "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "dense"},
                                           "requirements": requirements}}, **spec}}


TINY_POOL = _nodepool("tiny", [
    {"key": L.INSTANCE_TYPE, "operator": "In", "values": ["t3.medium"]},
    {"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]},
    {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
])
TINY_PODS = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tiny"},
             "spec": {"replicas": 30, "selector": {"matchLabels": {"app": "tiny"}},
                      "template": {"metadata": {"labels": {"app": "tiny"}},
                                   "spec": {"nodeSelector": {"pool": "tiny"},
                                            "containers": [{"name": "c", "resources": {
                                                "requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}
MANIFESTS = [NODECLASS, TINY_POOL, TINY_PODS]


def _comparable(claims: list[Obj]) -> list[dict[str, Any]]:
    """NodeClaims as created, without what differs per run (names, uids, times)."""
    out = []
    for claim in claims:
        meta = claim["metadata"]
        out.append({"labels": meta.get("labels"), "annotations": meta.get("annotations"), "spec": claim["spec"]})
    return sorted(out, key=repr)


def _claims(cluster: InMemoryCluster) -> list[dict[str, Any]]:
    return _comparable(cluster.list(r.NODECLAIMS))


def _record_created(cluster: InMemoryCluster) -> list[Obj]:
    """NodeClaims as the provisioner created them (the lifecycle controller adds launch labels later)."""
    created: list[Obj] = []
    cluster.add_listener(lambda kind, event, obj: created.append(obj)
                         if kind == r.NODECLAIMS and event == "ADDED" else None)
    return created


def _simulate_f(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``simulate -f``'s decision and the NodeClaims its in-memory cluster holds afterwards."""
    decision, cluster = decide_in_cluster(copy.deepcopy(docs), REGION)
    return decision, _claims(cluster)


def _scenario_first_batch(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A scenario replay stepped until its first NodeClaims exist."""
    scenario = parse_scenario({"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario",
                               "metadata": {"name": "one-path"},
                               "spec": {"duration": "10m", "region": REGION, "zones": region_zones(REGION),
                                        "manifests": copy.deepcopy(docs)}})
    world = World(scenario, 1, scenario.launch_latency)
    created = _record_created(world.cluster)
    driver = NodewrightDriver(world)
    now = scenario.start
    while not world.cluster.list(r.NODECLAIMS) and now < scenario.start + 60:
        world.clock.now = now
        world.tick(now)
        if driver.should_step(now):
            driver.step(now)
        now += 1.0
    return _comparable(created)


class _Clock:
    def __init__(self) -> None:
        self.now = 1_784_548_800.0

    def __call__(self) -> float:
        return self.now


def _controller(docs: list[dict[str, Any]], extra: list[Obj] = (),  # type: ignore[assignment]
                options: ControllerOptions | None = None) -> list[dict[str, Any]]:
    """``nodewright run``'s controllers (ControllerManager.step) until the first batch closed: pods come from
    kube-scheduler marking them Unschedulable, the batch waits out its idle window. ``options``: the settings
    (Karpenter's defaults when None)."""
    clock = _Clock()
    cluster = InMemoryCluster(clock, seed=5)
    created = _record_created(cluster)
    load_cluster(parse_documents(copy.deepcopy(docs)), cluster)
    for obj in extra:
        cluster.create(r.PODS, obj)
    ec2 = SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0))
    cloud = SimulatedCloudProvider(ec2, REGION, region_zones(REGION), lambda n: cluster.get(r.EC2NODECLASSES, n))
    manager = ControllerManager(Context(cluster, cloud, clock, Metrics(), "test"), options or ControllerOptions())
    for _ in range(5):
        manager.step()
        if cluster.list(r.NODECLAIMS):
            break
        clock.now += 1.0
    return _comparable(created)


def test_max_pods_110_gives_one_node_on_every_path() -> None:
    decision, from_simulate = _simulate_f(MANIFESTS)
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "t3.medium" and len(plan["pods"]) == 30
    assert plan["requests"]["pods"] == 30
    from_scenario = _scenario_first_batch(MANIFESTS)
    from_controller = _controller(MANIFESTS)
    assert len(from_simulate) == 1
    assert from_simulate == from_scenario == from_controller
    (claim,) = from_simulate
    assert claim["spec"]["resources"]["requests"] == {"cpu": "300m", "memory": "480Mi", "pods": "30"}
    assert {"key": L.INSTANCE_TYPE, "operator": "In", "values": ["t3.medium"]} in claim["spec"]["requirements"]


def test_without_the_kubelet_setting_the_eni_limit_gives_two_nodes() -> None:
    default_class = copy.deepcopy(NODECLASS)
    del default_class["spec"]["kubelet"]
    decision, claims = _simulate_f([default_class, TINY_POOL, TINY_PODS])
    assert [len(nc["pods"]) for nc in decision["nodeclaims"]] == [17, 13]  # t3.medium: 3 ENIs x (6 - 1) + 2
    assert len(claims) == 2


CAPPED_POOL = _nodepool("capped", [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge"]},
                                   {"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]}],
                        limits={"cpu": "6"})


def _node(name: str, pool: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {L.NODEPOOL: pool, "pool": pool, L.INSTANCE_TYPE: "m5.xlarge",
                                                  L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "on-demand",
                                                  L.INITIALIZED: "true"}, **meta},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                       "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {"nodeSelector": {"pool": "capped"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
                     **spec}}


def test_limits_count_the_capacity_a_pool_already_owns() -> None:
    # The pool owns a full 4-vCPU node; its limit is 6 vCPU, so a second m5.xlarge (4 vCPU) would exceed it.
    docs = [NODECLASS, CAPPED_POOL, _node("owned", "capped"), _pod("full", "3500m", nodeName="owned"),
            _pod("waiting", "1")]
    decision, claims = _simulate_f(docs)
    assert decision["nodeclaims"] == [] and claims == []
    assert [u["pod"] for u in decision["unschedulable"]] == ["default/waiting"]
    assert _controller(docs) == []
    # With room under the limit (12 vCPU) the same pod gets a node, on both paths alike.
    roomy = copy.deepcopy(CAPPED_POOL)
    roomy["spec"]["limits"] = {"cpu": "12"}
    docs[1] = roomy
    decision, claims = _simulate_f(docs)
    assert [nc["instance_type"] for nc in decision["nodeclaims"]] == ["m5.xlarge"]
    assert claims == _controller(docs) and len(claims) == 1


def test_pods_of_a_deleting_node_are_placed_again() -> None:
    leaving = _node("leaving", "capped", deletionTimestamp="2026-07-20T11:59:00Z")
    roomy = copy.deepcopy(CAPPED_POOL)
    roomy["spec"]["limits"] = {"cpu": "12"}
    docs = [NODECLASS, roomy, leaving, _pod("evicted-soon", "2", nodeName="leaving")]
    decision, claims = _simulate_f(docs)
    (plan,) = decision["nodeclaims"]
    assert plan["pods"] == ["default/evicted-soon"] and plan["instance_type"] == "m5.xlarge"
    assert claims == _controller(docs)


def test_spot_interruption_marks_the_offering_through_the_interruption_controller() -> None:
    """The simulator runs the interruption controller's own path: the warning reaches the controller through the
    queue, and the controller (not the simulator) tells the cloud provider, whose unavailable-offerings cache is
    the AWS provider's."""
    spot_pool = copy.deepcopy(TINY_POOL)
    spot_pool["spec"]["template"]["spec"]["requirements"][2]["values"] = ["spot"]
    scenario = parse_scenario({"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario",
                               "metadata": {"name": "spot"},
                               "spec": {"duration": "10m", "region": REGION, "zones": ["us-east-1a"],
                                        "manifests": [NODECLASS, spot_pool, TINY_PODS],
                                        "events": [{"at": "3m", "interruptSpot": {"count": 1}}]}})
    world = World(scenario, 1, scenario.launch_latency)
    driver = NodewrightDriver(world)
    marked_at = None
    now = scenario.start
    while now < scenario.start + 240:
        world.clock.now = now
        world.tick(now)
        if driver.should_step(now):
            driver.step(now)
        if marked_at is None and driver.cloud.unavailable.is_unavailable("t3.medium", "us-east-1a", "spot"):
            marked_at = now - scenario.start
        now += 1.0
    assert marked_at is not None and 180.0 <= marked_at <= 182.0
    assert driver.manager.interruption is not None
