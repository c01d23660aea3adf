"""EC2NodeClass status through the real ``AWSCloudProvider`` over moto: subnets ranked by free IPs with zone ids,
the discovery-tagged security group, AL2023 AMIs per architecture, and the managed instance profile created
from ``spec.role`` and reused by the next controller."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws.conftest import CLUSTER, REGION, aws_env, make_cluster, make_provider, moto, stubbed_pricing  # noqa: F401

from nodewright.api import labels as L
from nodewright.cloud.aws.instanceprofiles import profile_name
from nodewright.controllers.common import Context
from nodewright.controllers.nodeclass import NodeClassController
from nodewright.controllers.nodepool_status import NodePoolStatusController
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics

from .fakes import FakeClock

NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]},
}
NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
    "spec": {"template": {"spec": {
        "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}},
}


@pytest.fixture
def aws(moto: None) -> Iterator[Any]:  # noqa: F811 - the moto fixture imported above
    yield make_cluster(boto3.client("ec2", region_name=REGION), boto3.client("iam", region_name=REGION))


def controller_over_moto(kube: InMemoryCluster, clock: FakeClock) -> NodeClassController:
    pricing, _ = stubbed_pricing()
    provider = make_provider({}, pricing)
    return NodeClassController(Context(kube, provider, clock, Metrics(), CLUSTER))


def test_status_resolved_through_aws_and_profile_created_then_reused(aws: Any) -> None:
    clock = FakeClock()
    kube = InMemoryCluster(clock, seed=1)
    kube.create(r.EC2NODECLASSES, NODECLASS)
    controller_over_moto(kube, clock).reconcile()

    ec2 = boto3.client("ec2", region_name=REGION)
    zone_ids = {z["ZoneName"]: z["ZoneId"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    profile = profile_name(CLUSTER, REGION, "default")
    status = kube.get(r.EC2NODECLASSES, "default")["status"]
    assert status["subnets"] == [  # most free IPs first: /24, /25, /26
        {"id": aws.subnets[zone], "zone": zone, "zoneID": zone_ids[zone]}
        for zone in ("us-east-1a", "us-east-1b", "us-east-1c")]
    assert status["securityGroups"] == [{"id": aws.security_group, "name": "nodes"}]
    assert [(a["id"], a["requirements"][0]["values"]) for a in status["amis"]] == [
        (aws.ami_amd64, ["amd64"]), (aws.ami_arm64, ["arm64"])]
    assert status["instanceProfile"] == profile
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [("Ready", "True", "Ready")]

    iam = boto3.client("iam", region_name=REGION)
    created = iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
    assert [role["RoleName"] for role in created["Roles"]] == ["KarpenterNodeRole-demo"]
    tags = {t["Key"]: t["Value"] for t in created["Tags"]}  # moto lacks ListInstanceProfileTags
    assert tags == {"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": CLUSTER,
                    "karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": REGION}

    # A restarted controller (fresh caches) reuses the profile rather than creating another one.
    restarted = InMemoryCluster(clock, seed=2)
    restarted.create(r.EC2NODECLASSES, NODECLASS)
    controller_over_moto(restarted, clock).reconcile()
    assert restarted.get(r.EC2NODECLASSES, "default")["status"]["instanceProfile"] == profile
    assert [p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]] == [profile]


def test_unmatched_subnet_selector_makes_nodeclass_and_nodepool_not_ready(aws: Any) -> None:
    clock = FakeClock()
    kube = InMemoryCluster(clock, seed=1)
    doc = {**NODECLASS, "spec": {**NODECLASS["spec"], "subnetSelectorTerms": [{"tags": {"team": "nobody"}}]}}
    kube.create(r.EC2NODECLASSES, doc)
    kube.create(r.NODEPOOLS, NODEPOOL)
    controller = controller_over_moto(kube, clock)
    controller.reconcile()
    message = "EC2NodeClass 'default': subnetSelectorTerms matched no subnet"
    assert kube.get(r.EC2NODECLASSES, "default")["status"] == {"conditions": [{
        "type": "Ready", "status": "False", "reason": "NodeClassNotReady", "message": message,
        "lastTransitionTime": "2026-07-20T12:00:00Z", "observedGeneration": 1}]}
    NodePoolStatusController(controller.ctx).reconcile(force=True)
    ready = {c["type"]: c for c in kube.get(r.NODEPOOLS, "general")["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False", "NodeClassNotReady", f"EC2NodeClass 'default' is not ready: {message}")
