"""``simulate -f`` with capacity reservations in the EC2NodeClass's status: reserved offerings priced at
on-demand / 10^7 (Karpenter's rule) win over on-demand, and the launched node names its reservation."""

from __future__ import annotations

import random
from typing import Any

from nodewright.api.manifests import parse_nodeclaim
from nodewright.cloud.reservations import RESERVED_PRICE_DIVISOR
from nodewright.cloud.simulated import LatencyDistribution, SimulatedCloudProvider, SimulatedEC2
from nodewright.sim.decision import decide

RESERVATION = {"id": "cr-0123456789abcdef0", "instanceType": "m7i.2xlarge", "availabilityZone": "us-east-1b",
               "ownerID": "123456789012", "instanceMatchCriteria": "targeted", "reservationType": "default",
               "state": "active", "availableInstanceCount": 2}
CLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "nodes", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
             "capacityReservationSelectorTerms": [{"id": "cr-0123456789abcdef0"}]},
    "status": {"capacityReservations": [RESERVATION]}}
POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},
                             {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7i"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
       "spec": {"replicas": 12, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}


def test_simulate_plans_reserved_nodeclaims_in_the_reservation_zone() -> None:
    out = decide([CLASS, POOL, WEB])
    assert [(c["instance_type"], c["capacity_type"], c["zone"], len(c["pods"])) for c in out["nodeclaims"]] == [
        ("m7i.2xlarge", "reserved", "us-east-1b", 7), ("m7i.2xlarge", "reserved", "us-east-1b", 5)]
    assert out["nodeclaims"][0]["price_per_hour"] == round(0.4032 / RESERVED_PRICE_DIVISOR, 4) == 0.0


def test_without_the_status_the_same_input_launches_on_demand() -> None:
    plain = {**CLASS, "status": {}}
    out = decide([plain, POOL, WEB])
    assert {c["capacity_type"] for c in out["nodeclaims"]} == {"on-demand"}


def _claim(name: str) -> Any:
    return parse_nodeclaim({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name},
        "spec": {"requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m7i.2xlarge"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}})


def test_launches_fill_the_reservation_then_fall_back_to_on_demand() -> None:
    ec2 = SimulatedEC2(lambda: 0.0, random.Random(0), LatencyDistribution(30.0, 30.0))
    cloud = SimulatedCloudProvider(ec2, "us-east-1", ["us-east-1a", "us-east-1b"], lambda name: CLASS)
    launched = [cloud.create(_claim(f"c{i}")) for i in range(3)]
    labels = [c.metadata.labels or {} for c in launched]
    assert [(x["karpenter.sh/capacity-type"], x["topology.kubernetes.io/zone"]) for x in labels] == [
        ("reserved", "us-east-1b"), ("reserved", "us-east-1b"), ("on-demand", "us-east-1a")]
    assert labels[0]["karpenter.k8s.aws/capacity-reservation-id"] == "cr-0123456789abcdef0"
    assert labels[0]["karpenter.k8s.aws/capacity-reservation-type"] == "default"
    assert "karpenter.k8s.aws/capacity-reservation-id" not in labels[2]


def test_reserved_capacity_gate_off_plans_on_demand_with_one_warning(monkeypatch: Any, caplog: Any) -> None:
    """FEATURE_GATES ReservedCapacity=false, read by `simulate` as by the controller: the reservation in the status
    is not offered, the same pods go on-demand, and the class gets one warning line."""
    monkeypatch.setenv("FEATURE_GATES", "ReservedCapacity=false")
    out = decide([CLASS, POOL, WEB])
    assert [(c["capacity_type"], c["instance_type"], len(c["pods"])) for c in out["nodeclaims"]] == [
        ("on-demand", "m7i.4xlarge", 12)]
    assert [r.getMessage() for r in caplog.records if "ReservedCapacity" in r.getMessage()] == [
        "EC2NodeClass default: capacityReservationSelectorTerms ignored, the ReservedCapacity feature gate is off "
        "(FEATURE_GATES ReservedCapacity=true to use reservations)"]
    assert out["nodeclaims"] == decide([{**CLASS, "status": {}}, POOL, WEB])["nodeclaims"]  # as if none existed


def test_reserved_capacity_gate_off_never_launches_into_the_reservation() -> None:
    ec2 = SimulatedEC2(lambda: 0.0, random.Random(0), LatencyDistribution(30.0, 30.0))
    cloud = SimulatedCloudProvider(ec2, "us-east-1", ["us-east-1a", "us-east-1b"], lambda name: CLASS,
                                   reserved_capacity=False)
    launched = [cloud.create(_claim(f"c{i}")) for i in range(2)]
    assert [(c.metadata.labels or {})["karpenter.sh/capacity-type"] for c in launched] == ["on-demand", "on-demand"]
