"""DaemonSets on new nodes (issue 14), through every path: ``simulate -f`` (``decide``), a scenario replay's first
batch and the controller's provisioner create identical NodeClaims.

- overhead per instance type: a DaemonSet that runs only where ``instance-cpu Gt 8`` does not inflate a 4-vCPU
  c5.xlarge, and a GPU-only DaemonSet counts on no c5;
- every ``nodeSelectorTerm`` of a DaemonSet's required node affinity counts (ORed);
- Karpenter's lifecycle labels and the node class label are known on a new node;
- DaemonSet host ports: a pod that needs a port a DaemonSet holds on every type gets no node (and a replay settles
  instead of launching and deleting empty nodes forever); where the DaemonSet runs only on some types, the pod
  gets one of the others.
"""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api import labels as L
from nodewright.sim.runner import run
from nodewright.sim.scenario import parse_scenario

from .test_one_path import NODECLASS, _controller, _nodepool, _scenario_first_batch, _simulate_f

GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
POOL = _nodepool("agents", [
    {"key": L.INSTANCE_TYPE, "operator": "In", "values": ["c5.xlarge", "c5.2xlarge", "c5.4xlarge"]},
    {"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]},
    {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
])


def _daemonset(name: str, cpu: str, memory: str, *, terms: list[list[dict[str, Any]]] | None = None,
               host_port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "agent",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    spec: dict[str, Any] = {"containers": [container]}
    if terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"ds": name}},
                     "template": {"metadata": {"labels": {"ds": name}}, "spec": spec}}}


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def _app(cpu: str = "3", host_port: int | None = None, replicas: int = 1, name: str = "app") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": {"pool": "agents"}, "containers": [container]}}}}


SMALL_AGENT = _daemonset("small-agent", "100m", "128Mi")
BIG_AGENT = _daemonset("big-agent", "1500m", "1Gi", terms=[[_expr(L.INSTANCE_CPU, "Gt", "8")]])
GPU_PLUGIN = _daemonset("gpu-plugin", "50m", "64Mi", terms=[[_expr(GPU_MANUFACTURER, "In", "nvidia")]])


def _every_path(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``simulate -f``'s decision, after checking that the replay's first batch and the controller created the
    same NodeClaims as it did."""
    decision, claims = _simulate_f(docs)
    assert _scenario_first_batch(docs) == claims
    assert _controller(docs) == claims
    return decision, claims


def test_overhead_is_worked_out_per_instance_type() -> None:
    # As one pool-wide overhead (1650m) the 3-vCPU pod would need a c5.2xlarge; per type, a c5.xlarge (3920m
    # allocatable) runs only small-agent: 3000m + 100m fits.
    decision, claims = _every_path([NODECLASS, POOL, SMALL_AGENT, BIG_AGENT, GPU_PLUGIN, _app()])
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "c5.xlarge" and plan["price_per_hour"] == 0.17
    assert plan["requests"] == {"cpu": 3100, "memory": 1152 * 2**20, "pods": 2}
    (claim,) = claims
    assert claim["spec"]["resources"]["requests"] == {"cpu": "3100m", "memory": "1152Mi", "pods": "2"}


def test_a_larger_pod_gets_a_type_that_carries_the_big_agent() -> None:
    # 7 vCPU fits a c5.2xlarge (8 vCPU: instance-cpu Gt 8 is false, so small-agent only).
    decision, _ = _every_path([NODECLASS, POOL, SMALL_AGENT, BIG_AGENT, _app(cpu="7")])
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "c5.2xlarge" and plan["requests"]["cpu"] == 7100
    # 8 vCPU only fits a c5.4xlarge, where the big agent runs too: 8000m + 100m + 1500m.
    decision, claims = _every_path([NODECLASS, POOL, SMALL_AGENT, BIG_AGENT, _app(cpu="8")])
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "c5.4xlarge" and plan["requests"]["cpu"] == 9600
    assert claims[0]["spec"]["resources"]["requests"]["memory"] == "2176Mi"  # 1Gi + 128Mi + 1Gi


def test_every_node_selector_term_counts() -> None:
    # The first term names no pool; the second matches the pool's template label: the agent runs there.
    ored = _daemonset("ored", "500m", "256Mi", terms=[[_expr("pool", "In", "other")], [_expr("pool", "In", "agents")]])
    decision, claims = _every_path([NODECLASS, POOL, ored, _app(cpu="1")])
    (plan,) = decision["nodeclaims"]
    assert plan["requests"] == {"cpu": 1500, "memory": 1280 * 2**20, "pods": 2}
    assert claims[0]["spec"]["resources"]["requests"] == {"cpu": "1500m", "memory": "1280Mi", "pods": "2"}


def test_karpenter_labels_are_known_on_a_new_node() -> None:
    lifecycle = [
        _daemonset("on-registered", "200m", "64Mi", terms=[[_expr(L.REGISTERED, "In", "true")]]),
        _daemonset("on-initialized", "200m", "64Mi", terms=[[_expr(L.INITIALIZED, "In", "true")]]),
        _daemonset("on-nodeclass", "200m", "64Mi", terms=[[_expr(L.EC2NODECLASS, "In", "dense")]]),
        _daemonset("on-nodepool", "200m", "64Mi", terms=[[_expr(L.NODEPOOL, "In", "agents")]]),
        # Not on a node that is still initializing, nor on another node class's nodes.
        _daemonset("before-init", "1", "1Gi", terms=[[_expr(L.INITIALIZED, "DoesNotExist")]]),
        _daemonset("other-class", "1", "1Gi", terms=[[_expr(L.EC2NODECLASS, "In", "other")]]),
    ]
    decision, claims = _every_path([NODECLASS, POOL, *lifecycle, _app(cpu="1")])
    (plan,) = decision["nodeclaims"]
    assert plan["requests"] == {"cpu": 1800, "memory": 1280 * 2**20, "pods": 5}
    # The lifecycle labels are for this judgement only: the NodeClaim does not carry them.
    (claim,) = claims
    assert L.REGISTERED not in claim["labels"] and L.INITIALIZED not in claim["labels"]
    assert not any(r["key"] in (L.REGISTERED, L.INITIALIZED) for r in claim["spec"]["requirements"])


EXPORTER = _daemonset("node-exporter", "50m", "64Mi", host_port=9100)


def test_a_host_port_a_daemonset_holds_everywhere_launches_nothing() -> None:
    decision, claims = _every_path([NODECLASS, POOL, EXPORTER, _app(cpu="1", host_port=9100)])
    assert decision["nodeclaims"] == [] and claims == []
    assert decision["unschedulable"] == [{"pod": "default/app-0", "reason": (
        'incompatible with nodepool "agents", host port 9100/TCP is taken by daemonset kube-system/node-exporter '
        "on every instance type it allows")}]


def test_a_host_port_held_on_some_types_picks_another() -> None:
    # The port is held only where the big agent runs (more than 8 vCPU): two replicas (one per node, they share
    # the port) go to c5.xlarge, the cheapest type where the port is free.
    big_with_port = _daemonset("big-agent", "1500m", "1Gi", terms=[[_expr(L.INSTANCE_CPU, "Gt", "8")]],
                               host_port=9100)
    decision, claims = _every_path([NODECLASS, POOL, big_with_port, _app(cpu="1", host_port=9100, replicas=2)])
    assert [p["instance_type"] for p in decision["nodeclaims"]] == ["c5.xlarge", "c5.xlarge"]
    assert all(p["instance_types"] == ["c5.xlarge", "c5.2xlarge"] for p in decision["nodeclaims"])
    assert len(claims) == 2 and decision["unschedulable"] == []


def test_replay_settles_when_a_daemonset_holds_the_port() -> None:
    """Before: the replay launched a node for the pod, the exporter took port 9100 there, the node stayed empty
    and was deleted, and so on (12 launches and 11 empty-node deletions in 20 minutes). Now nothing launches."""
    scenario = {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "ports"},
                "spec": {"duration": "20m", "zones": ["us-east-1a"], "seed": 1,
                         "launchLatency": {"p50": "30s", "p90": "30s"}, "podStartDelay": "5s",
                         "manifests": copy.deepcopy([NODECLASS, POOL, EXPORTER, _app(cpu="1", host_port=9100)]),
                         "events": []}}
    summary = run(parse_scenario(scenario)).summary
    assert summary["nodes_launched"] == 0 and summary["disruptions_by_reason"] == {}
    assert summary["unscheduled_pods_at_end"] == 1
    # A second, port-free replica gets a node and keeps it; the exporter runs there, the pod with the port waits.
    scenario["spec"]["manifests"].append(_app(cpu="1", name="free"))
    summary = run(parse_scenario(scenario)).summary
    assert summary["nodes_launched"] == 1 and summary["disruptions_by_reason"] == {}
    assert summary["unscheduled_pods_at_end"] == 1
