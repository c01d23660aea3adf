"""Managed instance profiles: deterministic name, role attached once, PassRole denial as one sentence."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from aws.conftest import CLUSTER, REGION, Cluster
from nodewright.cloud.aws.instanceprofiles import InstanceProfileProvider, profile_name, role_name
from nodewright.cloud.provider import AuthorizationError


def test_profile_created_tagged_and_reused(cluster: Cluster) -> None:
    iam = boto3.client("iam", region_name=REGION)
    calls: list[Any] = []
    iam.meta.events.register("before-call.iam.CreateInstanceProfile", lambda **kw: calls.append(1))
    provider = InstanceProfileProvider(iam, CLUSTER, REGION)
    name = provider.resolve("default", "KarpenterNodeRole-demo", None)
    assert name == profile_name(CLUSTER, REGION, "default") and name.startswith("demo_") and len(name) == 21
    InstanceProfileProvider(iam, CLUSTER, REGION).resolve("default", cluster.role_arn, None)  # restart: reuse
    assert len(calls) == 1
    profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["KarpenterNodeRole-demo"]
    tags = {t["Key"]: t["Value"] for t in profile["Tags"]}
    assert tags["kubernetes.io/cluster/demo"] == "owned" and tags["karpenter.k8s.aws/ec2nodeclass"] == "default"


def test_given_instance_profile_is_used_as_is(aws_env: None) -> None:
    provider = InstanceProfileProvider(object(), CLUSTER, REGION)  # no IAM call may happen
    assert provider.resolve("default", None, "MyProfile") == "MyProfile"
    assert role_name("arn:aws:iam::1:role/path/Nodes") == "Nodes"


def test_passrole_denial_when_adding_role(aws_env: None) -> None:
    iam = boto3.client("iam", region_name=REGION)
    stubber = Stubber(iam)
    name = profile_name(CLUSTER, REGION, "default")
    profile = {"Path": "/", "InstanceProfileName": name, "InstanceProfileId": "AIPAEXAMPLE0000000000",
               "Arn": f"arn:aws:iam::111122223333:instance-profile/{name}",
               "CreateDate": "2026-01-01T00:00:00Z", "Roles": []}
    stubber.add_response("get_instance_profile", {"InstanceProfile": profile}, {"InstanceProfileName": name})
    stubber.add_client_error("add_role_to_instance_profile", service_error_code="AccessDenied", service_message=(
        "User: arn:aws:sts::111122223333:assumed-role/nodewright-controller/1732 is not authorized to perform: "
        "iam:PassRole on resource: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo because no "
        "identity-based policy allows the iam:PassRole action"), http_status_code=403,
        expected_params={"InstanceProfileName": name, "RoleName": ANY})
    stubber.activate()
    with pytest.raises(AuthorizationError) as caught:
        InstanceProfileProvider(iam, CLUSTER, REGION).resolve("default", "KarpenterNodeRole-demo", None)
    assert str(caught.value) == (
        "the controller role arn:aws:iam::111122223333:role/nodewright-controller may not iam:PassRole on "
        "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo: add iam:PassRole for that role with condition "
        "iam:PassedToService=ec2.amazonaws.com")
