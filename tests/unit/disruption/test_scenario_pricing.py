"""Scenario replay (``simulate --scenario [--pricing]``): consolidation decides on the policy given to the run and
honours the NodePool's minimum saving. One NodePool of c5.large ($0.085/h), c5.xlarge ($0.17/h) and m6i.large
($0.096/h) in us-east-1a; three 1-vCPU pods at 1 min, one left at 8 min; 30 minutes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodewright.api.annotations import CONSOLIDATION_MINIMUM_SAVING
from nodewright.sim.runner import run
from nodewright.sim.scenario import parse_scenario

from .real import policy

POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
    "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                         {"key": "node.kubernetes.io/instance-type", "operator": "In",
                          "values": ["c5.large", "c5.xlarge", "m6i.large"]}]}},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}},
}
NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "nodes", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}
API = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
       "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "api"}}, "template": {
           "metadata": {"labels": {"app": "api"}},
           "spec": {"containers": [{"name": "c", "image": "pause",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}
M6I_PLAN = policy({"savingsPlans": [{"type": "EC2Instance", "family": "m6i", "region": "us-east-1",
                                     "commitmentUsdPerHour": 0.1, "discountPercent": 40}]})


def _run(minimum: str | None, with_plan: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    pool = copy.deepcopy(POOL)
    if minimum is not None:
        pool["metadata"]["annotations"] = {CONSOLIDATION_MINIMUM_SAVING: minimum}
    scenario = parse_scenario({
        "apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "consolidation-prices"},
        "spec": {"duration": "30m", "zones": ["us-east-1a"], "seed": 1,
                 "launchLatency": {"p50": "30s", "p90": "30s"}, "manifests": [pool, NODECLASS, API],
                 "events": [{"at": "1m", "scale": {"deployment": "api", "replicas": 3}},
                            {"at": "8m", "scale": {"deployment": "api", "replicas": 1}}]}})
    result = run(scenario, pricing=M6I_PLAN if with_plan else None)
    return result.summary, result.timeline[-1].to_dict()


@pytest.mark.parametrize(("minimum", "with_plan", "disruptions", "final_per_hour", "cost", "effective"), [
    # List prices: the c5.xlarge left with one pod is replaced by a c5.large ($0.085/h saved).
    (None, False, {"Underutilized": 1}, 0.085, 0.0536, None),
    # A $0.10/h minimum: that replacement is skipped; the c5.xlarge stays.
    ("0.1", False, {}, 0.17, 0.0821, None),
    # Under the m6i Savings Plan the last pod ends on an m6i.large the commitment pays for.
    (None, True, {"Empty": 1, "Underutilized": 1}, 0.096, 0.0691, 0.0641),
    # With both, the last pod is left on an m6i.large under the plan: only emptiness acts (the minimum gating a
    # move at effective prices: tests/unit/disruption/test_effective_savings.py).
    ("0.1", True, {"Empty": 2}, 0.096, 0.0705, 0.065),
])
def test_scenario_consolidation_follows_policy_and_minimum(minimum: str | None, with_plan: bool,
                                                           disruptions: dict[str, int], final_per_hour: float,
                                                           cost: float, effective: float | None) -> None:
    summary, last = _run(minimum, with_plan)
    assert summary["disruptions_by_reason"] == disruptions
    assert (last["nodes"], last["cost_per_hour"]) == (1, final_per_hour)
    assert summary["cost_usd"] == cost
    assert summary.get("effective_cost_usd") == effective
