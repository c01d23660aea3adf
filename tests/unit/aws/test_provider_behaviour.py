"""Provider behaviour beyond the happy path: authorization backoff, bundled fallbacks, spot interruption."""

from __future__ import annotations

import tomllib
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from aws.conftest import REGION, Cluster, make_provider, nodeclaim, nodeclass, stubbed_pricing
from nodewright.cloud.aws.instancetypes import InstanceTypeProvider
from nodewright.cloud.aws.pricing import PricingProvider
from nodewright.cloud.provider import AuthorizationError, NodeClassNotReadyError
from nodewright.cloud.unavailable import UnavailableOfferings


def test_authorization_error_is_not_retried_until_backoff_expires(cluster: Cluster) -> None:
    now = [0.0]
    pricing, _ = stubbed_pricing()
    provider = make_provider({"default": nodeclass()}, pricing, clock=lambda: now[0])
    iam = boto3.client("iam", region_name=REGION)
    stubber = Stubber(iam)
    denial = ("User: arn:aws:sts::123456789012:assumed-role/ctl/1 is not authorized to perform: iam:PassRole on "
              "resource: arn:aws:iam::123456789012:role/KarpenterNodeRole-demo")
    for _ in range(2):
        stubber.add_client_error("get_instance_profile", service_error_code="AccessDenied", service_message=denial)
    stubber.activate()
    provider.instance_profiles._iam = iam
    with pytest.raises(AuthorizationError) as first:
        provider.create(nodeclaim())
    now[0] = 29.0
    with pytest.raises(AuthorizationError) as second:
        provider.create(nodeclaim())  # within the 30 s backoff: no IAM call (only 2 responses queued)
    assert second.value is first.value
    assert len(stubber._queue) == 1
    now[0] = 30.0
    with pytest.raises(AuthorizationError):
        provider.create(nodeclaim())
    stubber.assert_no_pending_responses()
    assert provider._auth_backoff.delay("default") == 60.0  # the next window doubles


def test_selector_that_matches_nothing_says_which(cluster: Cluster) -> None:
    pricing, _ = stubbed_pricing()
    broken = nodeclass(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "nope"}}])
    provider = make_provider({"default": broken}, pricing)
    with pytest.raises(NodeClassNotReadyError, match="subnetSelectorTerms matched no subnet"):
        provider.create(nodeclaim())
    with pytest.raises(NodeClassNotReadyError, match="EC2NodeClass 'missing' not found"):
        provider.create(nodeclaim(nodeclass_name="missing"))


def test_instance_types_fall_back_to_bundled_snapshot_when_api_fails(aws_env: None) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    stubber.add_client_error("describe_instance_types", service_error_code="InternalError", http_status_code=500)
    stubber.add_client_error("describe_instance_type_offerings", service_error_code="InternalError",
                             http_status_code=500)
    stubber.activate()
    pricing: Any = PricingProvider(object(), object(), REGION)  # bundled prices, never refreshed here
    provider = InstanceTypeProvider(ec2, REGION, pricing, UnavailableOfferings(), patterns=("m5.large", "c5.large"))
    types = provider.instance_types(["us-east-1a"])
    assert provider.source == "bundled"
    assert [it.name for it in types] == ["c5.large", "m5.large"]
    assert types[1].cheapest_offering(capacity_types=["on-demand"]).price == 0.096


def test_spot_interruption_marks_the_spot_offering(provider: Any) -> None:
    provider.mark_spot_interrupted("m5.large", "us-east-1b")
    assert provider.unavailable.is_unavailable("m5.large", "us-east-1b", "spot")
    assert not provider.unavailable.is_unavailable("m5.large", "us-east-1b", "on-demand")


def test_bottlerocket_nodeclass_launches_with_merged_toml(cluster: Cluster) -> None:
    import base64

    pricing, _ = stubbed_pricing()
    provider = make_provider({"default": nodeclass(alias="bottlerocket@latest",
                                                   userData="[settings.kubernetes]\nkube-api-qps = 30\n")}, pricing)
    provider.create(nodeclaim(types=("c5.large",)))
    ec2 = boto3.client("ec2", region_name=REGION)
    template = ec2.describe_launch_templates()["LaunchTemplates"][0]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    text = base64.b64decode(data["UserData"]).decode()
    assert text.startswith('[settings.kubernetes]\nkube-api-qps = 30\ncluster-name = "demo"\n')
    assert [b["DeviceName"] for b in data["BlockDeviceMappings"]] == ["/dev/xvda", "/dev/xvdb"]


def test_bottlerocket_raid0_launch_binds_default_dirs_for_the_latest_alias(cluster: Cluster) -> None:
    """The alias version (``latest``) reaches the template: a bare ``bind``, as Bottlerocket >= 1.46.0 takes."""
    import base64

    pricing, _ = stubbed_pricing()
    provider = make_provider({"default": nodeclass(alias="bottlerocket@latest", instanceStorePolicy="RAID0")}, pricing)
    provider.create(nodeclaim(types=("c5.large",)))
    ec2 = boto3.client("ec2", region_name=REGION)
    template = ec2.describe_launch_templates()["LaunchTemplates"][0]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    settings = tomllib.loads(base64.b64decode(data["UserData"]).decode())["settings"]
    assert settings["bootstrap-commands"] == {"000-mount-instance-storage": {
        "commands": [["apiclient", "ephemeral-storage", "init"], ["apiclient", "ephemeral-storage", "bind"]],
        "mode": "always", "essential": True}}


def test_nodeclass_status_reports_not_ready_with_the_reason(cluster: Cluster) -> None:
    pricing, _ = stubbed_pricing()
    provider = make_provider({}, pricing)
    broken = nodeclass(securityGroupSelectorTerms=[{"name": "does-not-exist"}])
    assert provider.nodeclass_status(broken) == {"conditions": [{
        "type": "Ready", "status": "False", "reason": "NodeClassNotReady",
        "message": "EC2NodeClass 'default': securityGroupSelectorTerms matched no security group"}]}
    ready = provider.nodeclass_status(nodeclass())
    assert ready["conditions"] == [{"type": "Ready", "status": "True", "reason": "Ready", "message": ""}]
    assert [s["zone"] for s in ready["subnets"]] == ["us-east-1a", "us-east-1b", "us-east-1c"]
