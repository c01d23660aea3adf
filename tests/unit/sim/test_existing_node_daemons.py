"""DaemonSet room on every path (issue 14): an initialized node keeps room for the DaemonSets that should run on it
but have no pod there yet (Karpenter v1.14 ``NewExistingNode``), the same way in ``simulate -f`` and in the
controller's provisioner; a static NodePool's NodeClaim requests the DaemonSets of its chosen type, in the
controller and in scenario replay."""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api import labels as L
from nodewright.controllers.manager import ControllerOptions

from .test_one_path import (
    CAPPED_POOL,
    NODECLASS,
    _controller,
    _node,
    _nodepool,
    _pod,
    _scenario_first_batch,
    _simulate_f,
)

ROOMY = copy.deepcopy(CAPPED_POOL)
ROOMY["spec"]["limits"] = {"cpu": "12"}
AGENT = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
         "spec": {"selector": {"matchLabels": {"app": "agent"}},
                  "template": {"metadata": {"labels": {"app": "agent"}},
                               "spec": {"nodeSelector": {"pool": "capped"},
                                        "containers": [{"name": "a", "resources": {
                                            "requests": {"cpu": "1", "memory": "256Mi"}}}]}}}}


def _docs(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    # "owned" is an initialized m5.xlarge with 3920m allocatable, 500m of it in use; the pending pod asks 2800m.
    return [NODECLASS, ROOMY, _node("owned", "capped"), _pod("busy", "500m", nodeName="owned"), *extra,
            _pod("waiting", "2800m")]


def test_without_daemonsets_the_pod_takes_the_existing_node() -> None:
    decision, claims = _simulate_f(_docs())
    assert decision["nodeclaims"] == [] and claims == []
    assert _controller(_docs()) == []


def test_a_daemonset_not_running_yet_keeps_its_room_on_every_path() -> None:
    # 3920m - 500m - 1000m for the agent = 2420m < 2800m: the pod needs a new m5.xlarge, carrying the agent too.
    decision, claims = _simulate_f(_docs(AGENT))
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "m5.xlarge" and plan["pods"] == ["default/waiting"]
    assert plan["requests"]["cpu"] == 3800
    assert len(claims) == 1
    assert claims == _controller(_docs(AGENT))


STATIC_POOL = _nodepool("fixed", [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.4xlarge"]},
                                  {"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]},
                                  {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}], replicas=1)


def _agent(name: str, cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "a", "resources": {
                                      "requests": {"cpu": cpu, "memory": memory}}}], **spec}}}}


def test_a_static_nodeclaim_requests_the_daemonsets_of_its_type_in_replay_and_controller(monkeypatch) -> None:
    # big-agent runs only on types with more than 8 vCPU: the cheapest type, m5.large (2 vCPU), carries only the
    # 100m/128Mi agent, so that is the NodeClaim's request, not the pool-wide 2100m.
    big_only = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": L.INSTANCE_CPU, "operator": "Gt", "values": ["8"]}]}]}}}}
    docs = [NODECLASS, STATIC_POOL, _agent("agent", "100m", "128Mi"), _agent("big-agent", "2", "4Gi", **big_only)]
    monkeypatch.setenv("FEATURE_GATES", "StaticCapacity=true")  # replay reads it; the controller takes the option
    from_controller = _controller(docs, options=ControllerOptions(static_capacity=True))
    assert from_controller == _scenario_first_batch(docs)
    (claim,) = from_controller
    assert claim["spec"]["resources"]["requests"] == {"cpu": "100m", "memory": "128Mi", "pods": "1"}
