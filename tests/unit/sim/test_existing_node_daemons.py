"""An initialized node keeps room for the DaemonSets that should run on it but have no pod there yet (Karpenter
v1.14 ``NewExistingNode``), the same way in ``simulate -f`` and in the controller's provisioner."""

from __future__ import annotations

import copy
from typing import Any

from .test_one_path import CAPPED_POOL, NODECLASS, _controller, _node, _pod, _simulate_f

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
