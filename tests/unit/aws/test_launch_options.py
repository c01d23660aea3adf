"""Karpenter v1.14 EC2NodeClass launch fields reach the launch template (read back from moto's EC2), in the
shapes Karpenter's ``launchtemplate.go`` sends: interfaces per ``networkInterfaces`` with no prefixes, public IP
or conntrack on EFA-only ones; one primary interface otherwise; ``CpuOptions``; ``Placement``."""

from __future__ import annotations

from typing import Any

import boto3

from aws.conftest import CLUSTER, REGION, Cluster, make_provider, nodeclaim, nodeclass, stubbed_pricing
from nodewright.api.manifests import parse_ec2nodeclass
from nodewright.cloud.aws.launchtemplates import LaunchTemplateProvider, LaunchTemplateSpec, launch_options
from nodewright.cloud.aws.tags import resource_tags


def _nodeclass(**spec: Any) -> Any:
    doc = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "ml"},
           "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                    "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                    **spec}}
    return parse_ec2nodeclass(doc).spec


def _stored(cluster: Cluster, options: dict[str, Any]) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION)
    template = LaunchTemplateProvider(ec2, CLUSTER).ensure(LaunchTemplateSpec(
        cluster_name=CLUSTER, nodeclass="ml", image_id=cluster.ami_amd64, user_data="#!/bin/bash\n",
        security_group_ids=(cluster.security_group,), instance_profile="p",
        tags=resource_tags(CLUSTER, "ml", "ml", None), **options))
    versions = ec2.describe_launch_template_versions(LaunchTemplateName=template.name)["LaunchTemplateVersions"]
    data: dict[str, Any] = versions[0]["LaunchTemplateData"]
    return data


def test_efa_interfaces_conntrack_prefixes_cpu_and_placement(cluster: Cluster) -> None:
    spec = _nodeclass(
        networkInterfaces=[{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                           {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}],
        ipPrefixCount=2, connectionTracking={"tcpEstablishedTimeout": 3600, "udpTimeout": 30},
        cpuOptions={"nestedVirtualization": "enabled"}, placementGroupSelector={"name": "ml-cluster"})
    data = _stored(cluster, launch_options(spec))
    sg = [cluster.security_group]
    assert data["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "Groups": sg, "NetworkCardIndex": 0, "InterfaceType": "interface", "Ipv4PrefixCount": 2,
         "ConnectionTrackingSpecification": {"TcpEstablishedTimeout": 3600, "UdpTimeout": 30}},
        {"DeviceIndex": 0, "Groups": sg, "NetworkCardIndex": 1, "InterfaceType": "efa-only"},
    ]
    assert "SecurityGroupIds" not in data
    assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    assert data["Placement"] == {"GroupName": "ml-cluster"}


def test_prefixes_alone_make_one_primary_interface(cluster: Cluster) -> None:
    data = _stored(cluster, launch_options(_nodeclass(ipPrefixCount=1, placementGroupSelector={"id": "pg-0abc"})))
    assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": [cluster.security_group], "Ipv4PrefixCount": 1}]
    assert data["Placement"] == {"GroupId": "pg-0abc"}


def test_no_v114_fields_no_change() -> None:
    assert launch_options(_nodeclass()) == {}


def test_a_launch_into_a_placement_group_is_judged_by_the_iam_replay(cluster: Cluster) -> None:
    """Through the provider: the template carries ``Placement.GroupName``, CreateFleet launches from it, and the IAM
    replay (tests/conftest.py) authorizes ``placement-group/ml-cluster`` against the synthesized policies."""
    pricing, _ = stubbed_pricing()
    provider = make_provider({"default": nodeclass(placementGroupSelector={"name": "ml-cluster"})}, pricing)
    sent: list[dict[str, Any]] = []
    provider.instances._ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                                 lambda params, **_: sent.append(params))
    launched = provider.create(nodeclaim())
    assert launched.status is not None and launched.status.provider_id
    name = sent[0]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    ec2 = boto3.client("ec2", region_name=REGION)
    data = ec2.describe_launch_template_versions(LaunchTemplateName=name)["LaunchTemplateVersions"][0]
    assert data["LaunchTemplateData"]["Placement"] == {"GroupName": "ml-cluster"}
