"""Launch templates: deterministic names, reuse, tags, deletion of unused ones, block device defaults."""

from __future__ import annotations

import boto3
import pytest

from aws.conftest import CLUSTER, REGION, Cluster
from nodewright.api.ec2nodeclass import BlockDeviceMapping, MetadataOptions
from nodewright.cloud.aws.filters import tag_list
from nodewright.cloud.aws.launchtemplates import (
    LaunchTemplateProvider,
    LaunchTemplateSpec,
    block_devices,
    metadata_options,
    volume_size_gib,
)
from nodewright.cloud.aws.tags import resource_tags

#: Karpenter v1's tags for nodepool ``general`` / EC2NodeClass ``default`` of cluster ``demo`` with spec.tags team.
TAGS = {"team": "payments", "kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo",
        "karpenter.sh/nodepool": "general", "karpenter.k8s.aws/ec2nodeclass": "default"}


def _spec(cluster: Cluster, user_data: str = "#!/bin/bash\n", capacity_type: str = "on-demand") -> LaunchTemplateSpec:
    return LaunchTemplateSpec(cluster_name=CLUSTER, nodeclass="default", image_id=cluster.ami_amd64,
                              user_data=user_data, security_group_ids=(cluster.security_group,),
                              instance_profile="demo_profile", block_device_mappings=tuple(block_devices(None, "AL2023")),
                              tags=resource_tags(CLUSTER, "general", "default", {"team": "payments"}),
                              capacity_type=capacity_type)


def test_same_inputs_reuse_one_template(cluster: Cluster) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    provider = LaunchTemplateProvider(ec2, CLUSTER)
    first = provider.ensure(_spec(cluster))
    # A fresh provider (a restarted controller) finds the template by name instead of creating it again.
    second = LaunchTemplateProvider(ec2, CLUSTER).ensure(_spec(cluster))
    assert first == second and provider.created == 1
    assert len(ec2.describe_launch_templates()["LaunchTemplates"]) == 1
    tags = {t["Key"]: t["Value"] for t in ec2.describe_launch_templates()["LaunchTemplates"][0]["Tags"]}
    assert tags == TAGS


def test_changed_user_data_gets_a_new_template_and_unused_ones_are_deleted(cluster: Cluster) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    provider = LaunchTemplateProvider(ec2, CLUSTER)
    old = provider.ensure(_spec(cluster))
    new = provider.ensure(_spec(cluster, "#!/bin/bash\necho v2\n"))
    assert old.name != new.name and provider.created == 2
    ec2.create_launch_template(LaunchTemplateName="someone-elses", LaunchTemplateData={"ImageId": cluster.ami_amd64})
    other_cluster = {**TAGS, "eks:eks-cluster-name": "other", "kubernetes.io/cluster/other": "owned"}
    del other_cluster["kubernetes.io/cluster/demo"]
    ec2.create_launch_template(LaunchTemplateName="other-cluster", LaunchTemplateData={"ImageId": cluster.ami_amd64},
                               TagSpecifications=[{"ResourceType": "launch-template", "Tags": [
                                   {"Key": k, "Value": v} for k, v in other_cluster.items()]}])
    assert provider.delete_unused({new.name}) == [old.name]
    names = sorted(t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"])
    assert names == sorted([new.name, "other-cluster", "someone-elses"])


def test_template_data_document(cluster: Cluster) -> None:
    data = _spec(cluster, "hi").data()
    assert data == {
        "ImageId": cluster.ami_amd64, "UserData": "aGk=", "IamInstanceProfile": {"Name": "demo_profile"},
        "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3",
                                                                   "Encrypted": True, "DeleteOnTermination": True}}],
        "MetadataOptions": {"HttpEndpoint": "enabled", "HttpProtocolIpv6": "disabled", "HttpPutResponseHopLimit": 1,
                            "HttpTokens": "required"},
        "Monitoring": {"Enabled": False}, "SecurityGroupIds": [cluster.security_group],
        "TagSpecifications": [{"ResourceType": "network-interface", "Tags": tag_list(TAGS)}]}
    spot = _spec(cluster, "hi", capacity_type="spot").data()["TagSpecifications"]
    assert spot == [{"ResourceType": "network-interface", "Tags": tag_list(TAGS)},
                    {"ResourceType": "spot-instances-request", "Tags": tag_list(TAGS)}]


def test_block_device_defaults_and_overrides() -> None:
    assert block_devices(None, "Bottlerocket") == [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 4, "VolumeType": "gp3", "Encrypted": True,
                                            "DeleteOnTermination": True}},
        {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True,
                                            "DeleteOnTermination": True}}]
    custom = [BlockDeviceMapping.model_validate({"deviceName": "/dev/xvda", "ebs": {
        "volumeSize": "100G", "volumeType": "gp3", "iops": 4000, "encrypted": True}})]
    assert block_devices(custom, "AL2023") == [{"DeviceName": "/dev/xvda", "Ebs": {
        "VolumeSize": 94, "VolumeType": "gp3", "Encrypted": True, "Iops": 4000}}]
    assert metadata_options(MetadataOptions(httpPutResponseHopLimit=2))["HttpPutResponseHopLimit"] == 2


@pytest.mark.parametrize(("size", "gib"), [("20Gi", 20), ("100G", 94), ("1Ti", 1024), ("1T", 932)])
def test_volume_sizes_round_up_to_gib(size: str, gib: int) -> None:
    assert volume_size_gib(size) == gib


def test_garbage_collection_keeps_what_a_live_class_and_pool_use_and_deletes_the_rest(cluster: Cluster) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    now = [1000.0]
    provider = LaunchTemplateProvider(ec2, CLUSTER, clock=lambda: now[0])
    used = provider.ensure(_spec(cluster))
    stale = provider.ensure(_spec(cluster, "#!/bin/bash\necho v1\n"))
    ec2.create_launch_template(LaunchTemplateName="someone-elses", LaunchTemplateData={"ImageId": cluster.ami_amd64})
    needed = {"default": {"general"}}
    assert provider.garbage_collect(needed) == []  # both used just now
    now[0] += provider.ttl - 1
    provider.ensure(_spec(cluster))  # launches keep using one of them
    now[0] += 2
    assert provider.garbage_collect(needed) == [stale.name]  # unused for the TTL
    assert provider.garbage_collect({"default": {"batch"}}) == [used.name]  # its NodePool is gone
    assert [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]] == ["someone-elses"]
    # A restarted controller gives the templates it finds one TTL from the first pass that listed them.
    again = provider.ensure(_spec(cluster))
    restarted = LaunchTemplateProvider(ec2, CLUSTER, clock=lambda: now[0])
    assert restarted.garbage_collect(needed) == []
    now[0] += restarted.ttl
    assert restarted.garbage_collect(needed) == [again.name]
    assert provider.delete_for_nodeclass("default") == []


def test_created_templates_record_the_user_data_size_of_their_nodeclass(cluster: Cluster) -> None:
    """karpenter_ec2nodeclasses_userdata_bytes (Karpenter AWS main): the rendered user data's bytes, before base64,
    measured when a template is created (a reused one is not re-measured)."""
    from nodewright.metrics import Metrics

    provider = LaunchTemplateProvider(boto3.client("ec2", region_name=REGION), CLUSTER)
    provider.metrics = Metrics()
    spec = _spec(cluster, user_data="#!/bin/bash\necho héllo\n")
    provider.ensure(spec)
    assert provider.metrics.value("karpenter_ec2nodeclasses_userdata_bytes",
                                  {"nodeclass": spec.nodeclass}) == len("#!/bin/bash\necho héllo\n".encode())
