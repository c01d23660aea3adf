"""NodeOverlay through the controller end to end (emulator as API server, moto as EC2): with the gate on, an
overlay that prices c5.large up makes the launch choose m5.large and ranks the fleet request by the overlaid
prices (``prioritized``); the status controller writes ValidationSucceeded/Ready, Conflict for an equal-weight
overlap. The RBAC replay records the ``nodeoverlays`` list/watch and ``nodeoverlays/status`` patch."""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as L
from nodewright.settings import FeatureGates

from .harness import Replica, apply_pool, condition, pending_pod, wait_for


def _overlay(name: str, price: str, *types: str, weight: int = 10) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "price": price,
                     "requirements": [{"key": L.INSTANCE_TYPE, "operator": "In", "values": list(types)}]}}


def test_overlay_prices_the_launch_and_its_status_is_written(kube, account, replicas, core, custom) -> None:
    custom.create_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays",
                                        _overlay("c5-expensive", "5", "c5.large"))
    # Same weight, overlapping on c5.large: the later name wins, this one conflicts and is applied nowhere.
    custom.create_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays",
                                        _overlay("a-cheap-c5", "0.001", "c5.large", "m5.xlarge"))
    replicas.append(Replica(kube, account, "a", feature_gates=FeatureGates(node_overlay=True)).start())
    apply_pool(custom)
    for i in range(2):
        pending_pod(core, f"web-{i}")
    claim = wait_for(lambda: next((c for c in kube.emulator.snapshot("nodeclaims")
                                   if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 15, "a launched NodeClaim")
    assert claim["metadata"]["labels"][L.INSTANCE_TYPE] == "m5.large"  # c5.large costs $5/h now
    request = account.fleet_requests[0]
    ranked = sorted((o["Priority"], o["InstanceType"]) for cfg in request["LaunchTemplateConfigs"]
                    for o in cfg["Overrides"])
    # EC2 launches the lowest Priority it can: the overlaid $5/h c5.large comes after m5.xlarge ($0.192/h).
    assert [t for _, t in ranked] == ["m5.large"] * 3 + ["m5.xlarge"] * 3 + ["c5.large"] * 3
    assert request["OnDemandOptions"]["AllocationStrategy"] == "prioritized"

    def conditions(name: str) -> dict[str, tuple[str, str]]:
        obj = kube.emulator.peek("nodeoverlays", name) or {}
        return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or []}

    wait_for(lambda: conditions("c5-expensive").get("Ready") == ("True", "Ready"), 10, "c5-expensive Ready")
    assert conditions("c5-expensive")["ValidationSucceeded"] == ("True", "ValidationSucceeded")
    wait_for(lambda: conditions("a-cheap-c5").get("Ready") == ("False", "UnhealthyDependents"), 10, "conflict")
    assert conditions("a-cheap-c5")["ValidationSucceeded"] == ("False", "Conflict")
